#include <stdlib.h>
#include <string.h>
#include "dp.h"

/* Generic merge sort through a comparator defined in another unit (util.c): calls
   across units that only LTO could inline. */
static void merge_rec(char *a, char *tmp, size_t n, size_t size,
                      int (*cmp)(const void *, const void *)) {
    if (n < 2) return;
    if (n <= 12) {  /* insertion sort for short runs */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && cmp(a + (j - 1) * size, a + j * size) > 0; j--) {
                memcpy(tmp, a + j * size, size);
                memcpy(a + j * size, a + (j - 1) * size, size);
                memcpy(a + (j - 1) * size, tmp, size);
            }
        return;
    }
    size_t half = n / 2;
    merge_rec(a, tmp, half, size, cmp);
    merge_rec(a + half * size, tmp, n - half, size, cmp);
    size_t i = 0, j = half, k = 0;
    while (i < half && j < n) {
        if (cmp(a + i * size, a + j * size) <= 0) memcpy(tmp + k++ * size, a + i++ * size, size);
        else memcpy(tmp + k++ * size, a + j++ * size, size);
    }
    while (i < half) memcpy(tmp + k++ * size, a + i++ * size, size);
    while (j < n) memcpy(tmp + k++ * size, a + j++ * size, size);
    memcpy(a, tmp, n * size);
}

void dp_merge_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    char *tmp = malloc(n * size + size);
    if (!tmp) abort();
    merge_rec(base, tmp, n, size, cmp);
    free(tmp);
}

static void swap_u32(uint32_t *a, uint32_t *b) { uint32_t t = *a; *a = *b; *b = t; }

void dp_quick_sort_u32(uint32_t *v, size_t n) {
    while (n > 16) {
        uint32_t pivot = v[n / 2];
        size_t i = 0, j = n - 1;
        for (;;) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i >= j) break;
            swap_u32(&v[i++], &v[j--]);
        }
        if (j + 1 < n - j - 1) { dp_quick_sort_u32(v, j + 1); v += j + 1; n -= j + 1; }
        else { dp_quick_sort_u32(v + j + 1, n - j - 1); n = j + 1; }
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) swap_u32(&v[j - 1], &v[j]);
}
