#include "kernels.h"
uint64_t idot(const int32_t *a, const int32_t *b, int n) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += (int64_t)a[i] * b[i];
    return (uint64_t)s;
}
void mix(uint32_t *x, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t v = x[i];
        v ^= v << 13; v ^= v >> 17; v ^= v << 5;
        x[i] = v * 2654435761u;
    }
}
void widen(uint16_t *out, const uint8_t *in, int n) {
    for (int i = 0; i < n; i++) out[i] = (uint16_t)(in[i] * 3 + 1);
}
void prefix(int32_t *x, int n) {
    for (int i = 1; i < n; i++) x[i] += x[i - 1];
}
