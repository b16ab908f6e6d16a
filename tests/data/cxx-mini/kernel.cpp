// The hot code is a C++ member function: perf and callgrind name it demangled unless told
// not to, and the unit map knows it by its mangled name (tests/test_attribution.py).
#include "kernel.hpp"

namespace mini {
unsigned long Kernel::run(unsigned long n) const {
    unsigned long acc = seed_;
    for (unsigned long i = 0; i < n; i++)
        for (unsigned long j = 0; j < 1000; j++)
            acc = acc * 31 + (i ^ j);
    return acc;
}
}  // namespace mini
