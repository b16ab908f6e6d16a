/* A program whose work depends on where its code sits, as a program that hashes an
 * address does (Lua seeds its string hashes with one): the loop's length is taken from
 * spin()'s address.  Run as `layout fixed`, it does the same work wherever spin() is. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

unsigned spin(unsigned n);

int main(int argc, char **argv) {
    uintptr_t at = (uintptr_t)&spin;
    int fixed = argc > 1 && strcmp(argv[1], "fixed") == 0;
    unsigned n = 400000 + (fixed ? 0u : (unsigned)((at >> 4) & 0xf) * 200u);
    printf("%u\n", spin(n) != 7u);
    return 0;
}
