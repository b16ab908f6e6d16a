#include <string.h>
#include "dp.h"

int dp_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int dp_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

uint32_t dp_mix32(uint32_t x) {  /* murmur3 finalizer */
    x ^= x >> 16; x *= 0x85ebca6bU;
    x ^= x >> 13; x *= 0xc2b2ae35U;
    x ^= x >> 16;
    return x;
}

size_t dp_min_size(size_t a, size_t b) { return a < b ? a : b; }
