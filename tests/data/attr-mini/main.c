/* Two kernels in two units, each about half of the run (tests/test_attribution.py). */
#include <stdio.h>
#include <stdlib.h>

unsigned sum_a(const unsigned *v, unsigned n);
unsigned sum_b(const unsigned *v, unsigned n);

int main(int argc, char **argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
    enum { N = 1 << 14 };
    static unsigned v[N];
    for (unsigned i = 0; i < N; i++)
        v[i] = i * 2654435761u;
    unsigned acc = 0;
    for (unsigned r = 0; r < rounds; r++) {
        v[r % N] ^= acc;
        acc += sum_a(v, N) ^ sum_b(v, N);
    }
    printf("%u\n", acc);
    return 0;
}
