/* The driver: `rounds` passes of mix (kern.c) over two arrays that stay in the cache. */
#include <stdio.h>
#include <stdlib.h>

void mix(int *restrict y, const int *restrict x, int n);

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    static int x[4096], y[4096];
    for (int i = 0; i < 4096; i++)
        x[i] = (int)(i * 2654435761u);
    for (int r = 0; r < rounds; r++)
        mix(y, x, 4096);
    long sum = 0;
    for (int i = 0; i < 4096; i++)
        sum += y[i];
    printf("%ld\n", sum);
    return 0;
}
