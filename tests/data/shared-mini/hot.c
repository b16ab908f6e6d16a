/* The hot loop lives in a shared library the program loads. */
unsigned long work(unsigned long n) {
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++)
        for (unsigned long j = 0; j < 1000; j++)
            acc = acc * 31 + (i ^ j);
    return acc;
}
