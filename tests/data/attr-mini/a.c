/* A reduction the vectorizer turns into SIMD code at -O2 and above (not at -O1); its
   helper is inlined unless a candidate says otherwise (-fno-inline-functions). */
static unsigned mix(unsigned x) {
    return x * 3u + (x >> 5);
}

unsigned sum_a(const unsigned *v, unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++)
        s += mix(v[i]);
    return s;
}
