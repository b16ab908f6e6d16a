#include <stdio.h>
int add(int a, int b);
int bump(void);
int main(void) { bump(); printf("%d\n", add(bump(), 40)); return 0; }
