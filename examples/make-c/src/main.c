/* dataproc: runs each kernel on generated data and prints checksums (the output a
   tuner checks).  Usage: dataproc [scale]  (default 4: about a second at -O2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dp.h"

static unsigned char *text_of(size_t n, uint64_t seed) {
    unsigned char *t = malloc(n);
    if (!t) abort();
    dp_rng r;
    dp_rng_seed(&r, seed);
    dp_fill_text(&r, t, n);
    return t;
}

static void bench_compress(int scale) {
    size_t n = (size_t)1 << 20;
    unsigned char *text = text_of(n, 1);
    unsigned char *packed = malloc(n + n / 4 + 16), *unpacked = malloc(n);
    size_t total = 0;
    uint32_t crc = 0;
    for (int round = 0; round < 2 * scale; round++) {
        size_t c = dp_lz_compress(text, n, packed, n + n / 4 + 16);
        size_t d = dp_lz_decompress(packed, c, unpacked, n);
        if (d != n || memcmp(text, unpacked, n) != 0) { puts("lz: round trip FAILED"); exit(1); }
        total += c;
        crc = dp_crc32(crc, packed, c);
    }
    printf("lz: %zu bytes -> %zu, crc %08x\n", n, total / (2 * (size_t)scale), crc);
    free(text); free(packed); free(unpacked);
}

static void bench_words(int scale) {
    size_t n = (size_t)1 << 20;
    unsigned char *text = text_of(n, 2);
    dp_map *m = dp_map_new(64);
    for (int round = 0; round < 2 * scale; round++) {
        size_t i = 0;
        while (i < n) {
            size_t j = i;
            while (j < n && text[j] != ' ' && text[j] != '\n') j++;
            if (j > i) dp_map_add(m, (const char *)text + i, j - i, 1);
            i = j + 1;
        }
    }
    size_t hits = dp_count_matches(text, n, (const unsigned char *)"the compiler", 12);
    printf("words: %zu distinct, 'loop' x%ld, digest %016llx, matches %zu\n", dp_map_size(m),
           dp_map_get(m, "loop", 4), (unsigned long long)dp_map_digest(m), hits);
    dp_map_free(m);
    free(text);
}

static void bench_sort(int scale) {
    size_t n = 300000 * (size_t)scale;
    uint32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    dp_rng r;
    dp_rng_seed(&r, 3);
    for (size_t i = 0; i < n; i++) a[i] = b[i] = (uint32_t)dp_rng_next(&r);
    dp_merge_sort(a, n, sizeof *a, dp_cmp_u32);
    dp_quick_sort_u32(b, n);
    if (memcmp(a, b, n * sizeof *a) != 0) { puts("sort: results differ"); exit(1); }
    printf("sort: %zu keys, crc %08x\n", n, dp_crc32(0, (unsigned char *)a, n * sizeof *a));
    free(a); free(b);
}

static void bench_matrix(int scale) {
    int n = 200;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n),
           *c = malloc(sizeof(double) * n * n);
    dp_rng r;
    dp_rng_seed(&r, 4);
    for (int i = 0; i < n * n; i++) { a[i] = dp_rng_unit(&r); b[i] = dp_rng_unit(&r); }
    double trace = 0;
    for (int round = 0; round < 2 * scale; round++) {
        dp_matmul(a, b, c, n);
        trace += dp_matrix_trace(c, n);
    }
    printf("matrix: trace %.6f\n", trace);
    free(a); free(b); free(c);
}

int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 4;
    if (scale < 1) scale = 1;
    bench_compress(scale);
    bench_words(scale);
    bench_sort(scale);
    bench_matrix(scale);
    printf("nbody: energy %.17g\n", dp_nbody_energy_after(48, 300 * scale));
    printf("bigint: digit sum of %d! = %u\n", 2500 * scale, dp_factorial_digit_sum(2500 * scale));
    return 0;
}
