/* A program whose work depends on where its code sits, as a program that hashes an
 * address does (Lua seeds its string hashes with one): the loop's length is taken from
 * spin()'s address.  Run as `layout fixed`, it does the same work wherever spin() is;
 * as `layout random`, other work every run (as a seed from the time gives Lua). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

unsigned spin(unsigned n);

int main(int argc, char **argv) {
    uintptr_t at = (uintptr_t)&spin;
    const char *mode = argc > 1 ? argv[1] : "";
    unsigned n = 400000 + (strcmp(mode, "fixed") == 0 ? 0u : (unsigned)((at >> 4) & 0xff) * 20u);
    unsigned drawn = 0;
    if (strcmp(mode, "random") == 0 && getrandom(&drawn, sizeof drawn, 0) == sizeof drawn)
        n += drawn % 100003u;
    printf("%u\n", spin(n) != 7u);
    return 0;
}
