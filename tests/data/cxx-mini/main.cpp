#include <cstdio>
#include <cstdlib>
#include "kernel.hpp"

int main(int argc, char **argv) {
    mini::Kernel kernel(7);
    std::printf("%lu\n", kernel.run(argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 100));
    return 0;
}
