#include <cstdio>
#include "common.h"
int main() { std::printf("%d\n", common_work(500)); return 0; }
