/* A hot loop whose source hints the wrong way (`likely` on the rare case): the static
   layout makes the common path jump; BOLT's profile-driven layout straightens it. */
#include <stdio.h>
#include <stdlib.h>

unsigned step(unsigned acc, unsigned x);

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 20;
    unsigned acc = 1;
    for (unsigned r = 0; r < rounds; r++)
        for (unsigned i = 0; i < 4096; i++)
            acc = step(acc, i * 2654435761u + r);
    printf("%u\n", acc);
    return 0;
}
