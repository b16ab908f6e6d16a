#include <stdlib.h>
#include <string.h>
#include "dp.h"

/* Schoolbook multi-precision arithmetic in base 10^9: n! and its digit sum. */
#define BASE 1000000000u

static size_t mul_small(uint32_t *limbs, size_t len, uint32_t factor) {
    uint64_t carry = 0;
    for (size_t i = 0; i < len; i++) {
        uint64_t v = (uint64_t)limbs[i] * factor + carry;
        limbs[i] = (uint32_t)(v % BASE);
        carry = v / BASE;
    }
    while (carry) { limbs[len++] = (uint32_t)(carry % BASE); carry /= BASE; }
    return len;
}

uint32_t dp_factorial_digit_sum(int n) {
    size_t cap = (size_t)n + 16;
    uint32_t *limbs = calloc(cap, sizeof *limbs);
    if (!limbs) abort();
    limbs[0] = 1;
    size_t len = 1;
    for (int k = 2; k <= n; k++) len = mul_small(limbs, len, (uint32_t)k);
    uint32_t sum = 0;
    for (size_t i = 0; i < len; i++)
        for (uint32_t v = limbs[i]; v; v /= 10) sum += v % 10;
    free(limbs);
    return sum;
}
