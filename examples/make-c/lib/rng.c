#include "dp.h"

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void dp_rng_seed(dp_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) {  /* splitmix64 */
        seed += 0x9e3779b97f4a7c15ULL;
        uint64_t z = seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        r->s[i] = z ^ (z >> 31);
    }
}

uint64_t dp_rng_next(dp_rng *r) {  /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dp_rng_unit(dp_rng *r) { return (double)(dp_rng_next(r) >> 11) * 0x1.0p-53; }

/* Pseudo-English: words from a small vocabulary, so compressors and maps have work. */
static const char *const vocabulary[] = {
    "the", "of", "compiler", "loop", "vector", "inline", "function", "register", "cache",
    "branch", "memory", "unroll", "schedule", "and", "to", "a", "in", "is", "that", "for",
    "pipeline", "latency", "throughput", "alias", "pointer", "array", "stride", "kernel",
};

void dp_fill_text(dp_rng *r, unsigned char *buf, size_t n) {
    size_t words = sizeof vocabulary / sizeof vocabulary[0];
    size_t i = 0;
    while (i < n) {
        uint64_t x = dp_rng_next(r);
        const char *w = vocabulary[(x % 7 == 0) ? (x >> 8) % words : (x >> 8) % 8];
        while (*w && i < n) buf[i++] = (unsigned char)*w++;
        if (i < n) buf[i++] = (x >> 40) % 13 == 0 ? '\n' : ' ';
    }
}
