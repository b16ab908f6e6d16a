/* heavy() is too costly to inline at -O2 (cost just above the threshold of 225). */
int table[64];
int heavy(int x) {
  int s = 0;
  for (int i = 0; i < 8; i++) {
    s += table[(x + i) & 63] * (x ^ i);
    if (s > 1000) s -= table[i] * 3; else s += table[(i * 7) & 63];
    s ^= s << 2; s += x / (i + 3); s -= table[(s >> 4) & 63];
  }
  switch (x & 7) { case 0: s += 1; break; case 1: s *= 3; break; case 2: s -= 7; break;
    case 3: s ^= 99; break; case 4: s += table[5]; break; case 5: s -= table[9]; break;
    case 6: s *= table[3]; break; default: s += 42; }
  return s;
}
int use1(int v) { return heavy(v) + heavy(v + 1) + heavy(v * 3); }
int use2(int v) { return heavy(v - 1) * 2; }
