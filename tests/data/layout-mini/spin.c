unsigned spin(unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++)
        s = s * 31 + i;
    return s;
}
