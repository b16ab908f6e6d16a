// An inline function template: each unit that calls it out of line gets a copy (a weak
// symbol), and each binary keeps the first one it links.
template <class T> __attribute__((noinline)) T mix(T x, long n) {
    for (long i = 0; i < n; i++)
        x = x * 1103515245u + (T)(i >> 3) + (x >> 13);
    return x;
}
