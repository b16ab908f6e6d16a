#include <vector>
#include "core.hpp"

namespace rp {

// Jacobi iteration for the 2-D heat equation: a stencil loop that vectorizes.
double jacobi_heat(int n, int iterations) {
    std::vector<double> a(size_t(n) * n, 0.0), b(size_t(n) * n, 0.0);
    for (int i = 0; i < n; i++) a[i] = b[i] = 100.0;  // hot top edge
    for (int it = 0; it < iterations; it++) {
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                b[size_t(i) * n + j] = 0.25 * (a[size_t(i - 1) * n + j] + a[size_t(i + 1) * n + j] +
                                               a[size_t(i) * n + j - 1] + a[size_t(i) * n + j + 1]);
        std::swap(a, b);
    }
    double sum = 0;
    for (double v : a) sum += v;
    return sum;
}

}  // namespace rp
