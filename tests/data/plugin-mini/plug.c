unsigned work(long n) {
    unsigned x = 1;
    for (long i = 0; i < n; i++) x = x * 1103515245u + (unsigned)(i >> 3) + (x >> 13);
    return x;
}
