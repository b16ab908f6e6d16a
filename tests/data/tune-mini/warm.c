/* The warm unit: an insertion sort over small blocks. */
#include <stdint.h>

void warm_sort_blocks(uint32_t *data, int n, int block) {
    for (int start = 0; start + block <= n; start += block) {
        uint32_t *a = data + start;
        for (int i = 1; i < block; i++) {
            uint32_t v = a[i];
            int j = i - 1;
            while (j >= 0 && a[j] > v) {
                a[j + 1] = a[j];
                j--;
            }
            a[j + 1] = v;
        }
    }
}
