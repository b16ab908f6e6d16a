#include "mix.h"

// Links first, so its copy of mix<unsigned> is the one the program runs, though it calls
// it least.
unsigned first(long n) { return mix<unsigned>(1, n / 64); }

// A weak default that second.cpp's strong definition replaces.
extern "C" __attribute__((weak, noinline)) unsigned hook(unsigned x, long) { return x; }
