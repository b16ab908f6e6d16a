int work(const int *a, int n, int k) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    int v = a[i];
    if (v % k == 0) s += v * 3; else if (v % (k + 1) == 0) s -= v; else s ^= v << 2;
    if (s > 100000) s /= 3;
    switch (v & 7) { case 0: s += 11; break; case 1: s -= 5; break; case 2: s *= 3; break;
                     case 3: s += v; break; default: s ^= 0x55; }
    if (v % (k + 1) == 0) s += v * 4; else if (v % (k + 2) == 1) s -= v; else s ^= v << 2;
    if (s > 100000) s /= 4;
    switch ((v + 1) & 7) { case 0: s += 12; break; case 1: s -= 5; break; case 2: s *= 3; break;
                           case 3: s += v; break; default: s ^= 0x56; }
    if (v % (k + 2) == 0) s += v * 5; else if (v % (k + 1) == 2) s -= v; else s ^= v << 2;
    if (s > 100000) s /= 5;
    switch ((v + 2) & 7) { case 0: s += 13; break; case 1: s -= 5; break; case 2: s *= 3; break;
                           case 3: s += v; break; default: s ^= 0x57; }
  }
  return s;
}

int dot16(const short *x, const short *y, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}

void widen(const unsigned char *in, int *out, int n) {
  for (int i = 0; i < n; i++) out[i] = in[i] * 3 + in[i] / 5;
}

int scale(int v) { return v * 2 + 1; }
