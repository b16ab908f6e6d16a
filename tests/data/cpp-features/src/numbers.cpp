#include "util.h"
int digits(long n) { int d = 1; while (n /= 10) d++; return d; }
