#include <string.h>
#include "dp.h"

/* Boyer-Moore-Horspool, counting overlapping matches. */
size_t dp_count_matches(const unsigned char *hay, size_t n, const unsigned char *needle, size_t m) {
    if (m == 0 || m > n) return 0;
    size_t shift[256];
    for (int c = 0; c < 256; c++) shift[c] = m;
    for (size_t i = 0; i + 1 < m; i++) shift[needle[i]] = m - 1 - i;
    size_t count = 0, pos = 0;
    unsigned char last = needle[m - 1];
    while (pos + m <= n) {
        unsigned char c = hay[pos + m - 1];
        if (c == last && memcmp(hay + pos, needle, m - 1) == 0) count++;
        pos += shift[c];
    }
    return count;
}
