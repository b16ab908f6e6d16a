/* dataproc: a small data-processing benchmark made of several hot kernels. */
#ifndef DP_H
#define DP_H
#include <stddef.h>
#include <stdint.h>

/* rng.c */
typedef struct { uint64_t s[4]; } dp_rng;
void dp_rng_seed(dp_rng *r, uint64_t seed);
uint64_t dp_rng_next(dp_rng *r);
double dp_rng_unit(dp_rng *r);
void dp_fill_text(dp_rng *r, unsigned char *buf, size_t n);

/* util.c */
int dp_cmp_u32(const void *a, const void *b);
int dp_cmp_str(const void *a, const void *b);
uint32_t dp_mix32(uint32_t x);
size_t dp_min_size(size_t a, size_t b);

/* crc32.c */
uint32_t dp_crc32(uint32_t crc, const unsigned char *buf, size_t n);

/* lz.c */
size_t dp_lz_compress(const unsigned char *in, size_t n, unsigned char *out, size_t cap);
size_t dp_lz_decompress(const unsigned char *in, size_t n, unsigned char *out, size_t cap);

/* sort.c */
void dp_merge_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
void dp_quick_sort_u32(uint32_t *v, size_t n);

/* matrix.c */
void dp_matmul(const double *a, const double *b, double *c, int n);
double dp_matrix_trace(const double *a, int n);

/* hashmap.c */
typedef struct dp_map dp_map;
dp_map *dp_map_new(size_t capacity);
void dp_map_free(dp_map *m);
void dp_map_add(dp_map *m, const char *key, size_t len, long delta);
long dp_map_get(const dp_map *m, const char *key, size_t len);
size_t dp_map_size(const dp_map *m);
uint64_t dp_map_digest(const dp_map *m);

/* strsearch.c */
size_t dp_count_matches(const unsigned char *hay, size_t n, const unsigned char *needle, size_t m);

/* nbody.c */
double dp_nbody_energy_after(int bodies, int steps);

/* bigint.c */
uint32_t dp_factorial_digit_sum(int n);

#endif
