#include "common.h"
#include <vector>
int common_work(int n) { std::vector<int> v(n); for (int i = 0; i < n; i++) v[i] = i * i % 97; int s = 0; for (int x : v) s += x; return s; }
