/* The rare case is marked likely: the compiler lays it out as the fall-through. */
#define likely(x) __builtin_expect(!!(x), 1)

unsigned step(unsigned acc, unsigned x) {
    for (int k = 0; k < 8; k++) {
        if (likely((x >> 27) == 5)) {
            acc = acc * 31u + (x ^ (x >> 7));
            acc ^= acc << 9;
        } else {
            acc += x ^ (acc >> 3);
        }
        x = x * 1103515245u + 12345u;
    }
    return acc;
}
