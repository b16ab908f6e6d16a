#include "dp.h"

static uint32_t table[8][256];
static int table_ready;

static void build_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320U ^ (c >> 1) : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    table_ready = 1;
}

/* Slicing-by-8 CRC-32 with a byte-wise tail. */
uint32_t dp_crc32(uint32_t crc, const unsigned char *buf, size_t n) {
    if (!table_ready) build_tables();
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)buf[0] | (uint32_t)buf[1] << 8 |
                             (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24);
        uint32_t hi = (uint32_t)buf[4] | (uint32_t)buf[5] << 8 |
                      (uint32_t)buf[6] << 16 | (uint32_t)buf[7] << 24;
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
              table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
              table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
              table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        buf += 8; n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *buf++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
