#include "mix.h"

unsigned second(long n) { return mix<unsigned>(2, n); }

extern "C" __attribute__((noinline)) unsigned hook(unsigned x, long n) {
    for (long i = 0; i < n; i++)
        x = x * 22695477u + (unsigned)(i >> 5) + (x >> 11);
    return x;
}
