#include <stdio.h>
#include <stdlib.h>
unsigned long work(unsigned long n);
int main(int argc, char **argv) {
    printf("%lu\n", work(argc > 1 ? strtoul(argv[1], 0, 10) : 100));
    return 0;
}
