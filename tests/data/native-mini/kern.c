/* A loop the vectorizer takes: with this CPU's wider vectors (-march=native) it runs in
   a fraction of the instructions and time that x86-64's SSE2 needs. */
void mix(int *restrict y, const int *restrict x, int n) {
    for (int i = 0; i < n; i++)
        y[i] = y[i] * 3 + (x[i] ^ (x[i] >> 3));
}
