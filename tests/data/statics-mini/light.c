/* flow() here runs an eighth as long as heavy.c's. */
__attribute__((noinline)) static unsigned flow(unsigned x, long n) {
    for (long i = 0; i < n; i++)
        x = x * 22695477u + (unsigned)(i >> 3) + (x >> 13);
    return x;
}

unsigned light_effect(unsigned seed, long n) { return flow(seed, n); }
