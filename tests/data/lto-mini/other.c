/* A second program that links ops.o too (`make both`): its objects are shared. */
#include <stdio.h>
unsigned apply(unsigned op, unsigned a, unsigned b);
int main(void) { printf("%u\n", apply(3, 7, 9)); return 0; }
