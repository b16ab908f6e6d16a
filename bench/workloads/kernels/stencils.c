#include "kernels.h"
void stencil3(float *out, const float *in, int n) {
    for (int i = 1; i < n - 1; i++) out[i] = 0.25f * in[i - 1] + 0.5f * in[i] + 0.25f * in[i + 1];
}
void matvec(float *y, const float *m, const float *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float s = 0.0f;
        for (int c = 0; c < cols; c++) s += m[r * cols + c] * x[c];
        y[r] = s;
    }
}
void blur(float *out, const float *in, int w, int h) {
    for (int y = 1; y < h - 1; y++)
        for (int x = 1; x < w - 1; x++)
            out[y * w + x] = (in[(y - 1) * w + x] + in[(y + 1) * w + x] + in[y * w + x - 1]
                              + in[y * w + x + 1]) * 0.25f;
}
void clamp(float *x, float lo, float hi, int n) {
    for (int i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}
