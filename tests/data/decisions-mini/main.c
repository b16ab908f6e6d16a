#include <stdio.h>
#include <stdlib.h>

void scale(float *y, const float *x, float a, int n);
float total(const float *x, int n);

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    enum { N = 4096 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) { x[i] = (float)(i % 17) * 0.25f; y[i] = 1.0f; }
    for (int r = 0; r < rounds; r++)
        scale(y, x, 0.001f, N);
    printf("%.3f\n", total(y, N));
    return 0;
}
