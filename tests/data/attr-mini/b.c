/* The same work in another unit: the control when only a.c changes. */
unsigned sum_b(const unsigned *v, unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++)
        s += v[i] * 5u + (v[i] >> 3);
    return s;
}
