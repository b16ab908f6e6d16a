#include "util.h"
std::string repeat(const std::string& s, int n) { std::string out; while (n-- > 0) out += s; return out; }
