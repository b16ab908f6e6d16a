#include <stdio.h>
#include <stdlib.h>

int work(const int *a, int n, int k);
int dot16(const short *x, const short *y, int n);
void widen(const unsigned char *in, int *out, int n);
int scale(int v);

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int *a = malloc(n * sizeof *a), *c = malloc(n * sizeof *c);
  unsigned char *b = malloc(n);
  short *x = malloc(n * sizeof *x);
  for (int i = 0; i < n; i++) {
    a[i] = i * 7 % 13;
    b[i] = (unsigned char)i;
    x[i] = (short)(i * 3);
  }
  widen(b, c, n);
  long s = work(a, n, 3) + work(a, n / 2, 5) + work(a, n / 3, 7) + work(a, n / 4, 9)
           + work(a, n / 5, 2) + dot16(x, x, n);
  for (int i = 0; i < n; i++) s += scale(c[i]);   /* inlined only across units (LTO) */
  printf("%ld\n", s);
  return 0;
}
