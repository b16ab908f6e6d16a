/* Kernels the driver calls: scale's loop is vectorized at -O2; a decision carried in
   the IR can say otherwise. */
__attribute__((noinline)) void scale(float *y, const float *x, float a, int n) {
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

__attribute__((noinline)) float total(const float *x, int n) {
    float s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}
