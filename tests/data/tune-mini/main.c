/* Usage: mini [scale] -- prints checksums that must not change with the flags. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint32_t hot_checksum(const uint32_t *data, int n, int rounds);
void hot_scale(uint32_t *data, int n, uint32_t factor);
void warm_sort_blocks(uint32_t *data, int n, int block);

int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    int n = 4096;
    uint32_t *data = malloc(sizeof *data * (size_t)n);
    uint32_t seed = 12345;
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245U + 12345U;
        data[i] = seed >> 8;
    }
    uint32_t total = 0;
    for (int s = 0; s < scale; s++) {
        hot_scale(data, n, 3 + (uint32_t)s);
        total += hot_checksum(data, n, 24);
        warm_sort_blocks(data, n, 48);
        total += data[n / 2];
    }
    printf("checksum %u\n", total);
    free(data);
    return 0;
}
