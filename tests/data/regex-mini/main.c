/* Back-references send glibc's regexec through re_search_internal's slow paths. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    char line[256];
    regex_t re;
    if (regcomp(&re, "\\([a-z][a-z]*\\) \\1", 0) != 0)
        return 2;
    long hits = 0;
    for (long i = 0; i < rounds; i++) {
        snprintf(line, sizeof line, "alpha beta gamma delta %ld epsilon zeta eta theta "
                 "iota kappa lambda mu nu xi omicron pi rho sigma tau tau", i);
        hits += regexec(&re, line, 0, NULL, 0) == 0;
    }
    printf("%ld\n", hits);
    regfree(&re);
    return 0;
}
