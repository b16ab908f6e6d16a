/* A reduction the vectorizer turns into SIMD code at -O2 and above (not at -O1). */
unsigned sum_a(const unsigned *v, unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++)
        s += v[i] * 3u + (v[i] >> 5);
    return s;
}
