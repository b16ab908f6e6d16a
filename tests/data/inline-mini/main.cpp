#include <cstdio>
#include <cstdlib>

unsigned first(long n);
unsigned second(long n);
unsigned third(long n);
extern "C" unsigned hook(unsigned x, long n);

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    unsigned a = first(n), b = second(n), c = third(n), d = hook(4, n / 8);
    std::printf("%u %u %u %u\n", a, b, c, d);
    return 0;
}
