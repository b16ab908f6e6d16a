#include "util.h"
long checksum(const std::string& s) { long h = 7; for (char c : s) h = h * 31 + c; return h; }
