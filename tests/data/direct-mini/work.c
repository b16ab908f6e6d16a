unsigned long step(unsigned long acc, unsigned long x);
unsigned long work(unsigned long n) {
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++)
        for (unsigned long j = 0; j < 1000; j++)
            acc = step(acc, i ^ j);
    return acc;
}
