/* A driver whose hot loop calls into another unit: only link-time optimization can
   inline `apply` (ops.c) here, and fold the switch away for each call's constant op. */
#include <stdio.h>
#include <stdlib.h>

unsigned apply(unsigned op, unsigned a, unsigned b);

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 20;
    static unsigned char pick[4096];
    unsigned s = 12345;
    for (unsigned i = 0; i < sizeof pick; i++) {
        s = s * 1103515245u + 12345u;
        pick[i] = (s >> 16) % 100 == 0;
    }
    unsigned acc = 1;
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned i = 0; i < sizeof pick; i++)
            acc = apply(pick[i] ? 1 : 0, acc, i + r) + apply(6, acc, r);
    printf("%u\n", acc);
    return 0;
}
