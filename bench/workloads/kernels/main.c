/* Runs each kernel on arrays that fit the L2 cache, its rounds set so that each takes a
   similar share of the run; prints a checksum of every result (exact: no kernel lets the
   compiler reorder floating-point arithmetic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"

enum { N = 16384, W = 128, H = 128, ROWS = 128, COLS = 128 };
static float fa[N], fb[N], fc[N], fd[N], img[W * H], img2[W * H], mat[ROWS * COLS];
static int32_t ia[N], ib[N];
static uint32_t ux[N];
static uint8_t bytes[N];
static uint16_t words[N];

static uint64_t sum_bits(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ULL; }
    return h;
}

int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < N; i++) {
        fa[i] = (float)(i % 97) * 0.01f; fb[i] = (float)(i % 89) * 0.02f;
        fc[i] = (float)(i % 83) * 0.03f; fd[i] = 1.0f;
        ia[i] = i % 1000 - 500; ib[i] = (i * 7) % 1000 - 500;
        ux[i] = (uint32_t)i * 2654435761u; bytes[i] = (uint8_t)(i * 31);
    }
    for (int i = 0; i < W * H; i++) img[i] = (float)(i % 251) * 0.004f;
    for (int i = 0; i < ROWS * COLS; i++) mat[i] = (float)(i % 13) * 0.1f;
    uint64_t check = 0;
    for (int r = 0; r < 1000 * scale; r++) {
        saxpy(fd, fa, 0.0001f, N);
        triad(fc, fa, fb, 0.5f, N);
        poly(fb, fa, N);
        cmul(fa, fb, fc, fd, N / 2);
        for (int i = 0; i < N; i++) if (fa[i] > 10.0f || fa[i] < -10.0f) fa[i] *= 0.001f;
        stencil3(fc, fd, N);
        matvec(fd, mat, fc, ROWS, COLS);
        blur(img2, img, W, H);
        clamp(img2, 0.1f, 0.9f, W * H);
        check += idot(ia, ib, N);
        mix(ux, N);
        widen(words, bytes, N);
        prefix(ia, N / 8);
        for (int i = 0; i < N / 8; i++) ia[i] = i % 1000 - 500;
    }
    printf("%016llx %016llx %016llx %016llx %016llx\n", (unsigned long long)check,
           (unsigned long long)sum_bits(fa, sizeof fa), (unsigned long long)sum_bits(img2, sizeof img2),
           (unsigned long long)sum_bits(ux, sizeof ux), (unsigned long long)sum_bits(words, sizeof words));
    return 0;
}
