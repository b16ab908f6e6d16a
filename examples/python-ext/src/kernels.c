/* The hot code: a histogram-equalising pass and a checksum, over integer images. */
#include <stdint.h>
#include <stddef.h>

static uint32_t scramble(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

void kern_fill(uint16_t *image, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++)
        image[i] = (uint16_t)(scramble((uint32_t)i + seed) & 0x0fff);
}

void kern_equalise(uint16_t *image, size_t n) {
    uint32_t histogram[4096] = {0};
    for (size_t i = 0; i < n; i++)
        histogram[image[i]]++;
    uint32_t total = 0;
    for (int v = 0; v < 4096; v++) {
        total += histogram[v];
        histogram[v] = (uint32_t)((uint64_t)total * 4095 / n);
    }
    for (size_t i = 0; i < n; i++)
        image[i] = (uint16_t)histogram[image[i]];
}

uint64_t kern_checksum(const uint16_t *image, size_t n) {
    uint64_t a = 1, b = 0;
    for (size_t i = 0; i < n; i++) {
        a = (a + image[i]) % 65521;
        b = (b + a) % 65521;
    }
    return (b << 16) | a;
}
