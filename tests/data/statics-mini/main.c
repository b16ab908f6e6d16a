#include <stdio.h>
#include <stdlib.h>

unsigned heavy_effect(unsigned seed, long n);
unsigned light_effect(unsigned seed, long n);

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    unsigned h = heavy_effect(1, n);
    unsigned l = light_effect(2, n / 8);
    printf("%u %u\n", h, l);
    return 0;
}
