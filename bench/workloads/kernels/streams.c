#include "kernels.h"
void saxpy(float *y, const float *x, float a, int n) {
    for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
void triad(float *a, const float *b, const float *c, float s, int n) {
    for (int i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
void poly(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        y[i] = ((((0.1f * v + 0.2f) * v + 0.3f) * v + 0.4f) * v + 0.5f) * v + 0.6f;
    }
}
void cmul(float *re, float *im, const float *are, const float *aim, int n) {
    for (int i = 0; i < n; i++) {
        float r = re[i] * are[i] - im[i] * aim[i];
        float m = re[i] * aim[i] + im[i] * are[i];
        re[i] = r * 0.5f;
        im[i] = m * 0.5f;
    }
}
