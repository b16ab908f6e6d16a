#include "dp.h"

/* Blocked matrix multiply: the inner loop vectorizes; block sizes interact with
   unrolling and interleaving. */
#define BLOCK 32

void dp_matmul(const double *a, const double *b, double *c, int n) {
    for (int i = 0; i < n * n; i++) c[i] = 0.0;
    for (int ii = 0; ii < n; ii += BLOCK)
        for (int kk = 0; kk < n; kk += BLOCK)
            for (int jj = 0; jj < n; jj += BLOCK)
                for (int i = ii; i < ii + BLOCK && i < n; i++)
                    for (int k = kk; k < kk + BLOCK && k < n; k++) {
                        double aik = a[i * n + k];
                        for (int j = jj; j < jj + BLOCK && j < n; j++)
                            c[i * n + j] += aik * b[k * n + j];
                    }
}

double dp_matrix_trace(const double *a, int n) {
    double t = 0.0;
    for (int i = 0; i < n; i++) t += a[i * n + i];
    return t;
}
