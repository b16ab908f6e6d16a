/* The hot unit: loops whose speed depends on unrolling, vectorization and inlining. */
#include <stdint.h>

static uint32_t mix(uint32_t x, uint32_t k) {
    x ^= x >> 15;
    x *= 0x2c1b3c6dU + k;
    x ^= x >> 12;
    return x;
}

uint32_t hot_checksum(const uint32_t *data, int n, int rounds) {
    uint32_t acc = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++)
            acc += mix(data[i], (uint32_t)r) & 0xffff;
        acc = mix(acc, 7);
    }
    return acc;
}

void hot_scale(uint32_t *data, int n, uint32_t factor) {
    for (int i = 0; i < n; i++)
        data[i] = data[i] * factor + (data[i] >> 3);
}
