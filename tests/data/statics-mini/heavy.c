/* flow() here runs eight times as long as light.c's. */
__attribute__((noinline)) static unsigned flow(unsigned x, long n) {
    for (long i = 0; i < n; i++)
        x = x * 1103515245u + (unsigned)(i >> 3) + (x >> 13);
    return x;
}

unsigned heavy_effect(unsigned seed, long n) { return flow(seed, n); }
