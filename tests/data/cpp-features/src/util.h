#pragma once
#include <string>
#include <vector>
template <class T> T clamp_sum(const std::vector<T>& xs, T top) {
  T s{};
  for (const T& x : xs) s = s + x > top ? top : s + x;
  return s;
}
std::string repeat(const std::string& s, int n);
long checksum(const std::string& s);
int digits(long n);
