/* A small LZ77 compressor with hash chains: the kind of branchy, pointer-chasing code
   where inlining and unrolling decisions matter. Format: a flag byte per 8 items;
   literal = 1 byte, match = 2 bytes offset (1..65535) + 1 byte length (3..258). */
#include <string.h>
#include "dp.h"

#define WINDOW 65535
#define HASH_BITS 15
#define MIN_MATCH 3
#define MAX_MATCH 258
#define MAX_CHAIN 48

static inline uint32_t hash3(const unsigned char *p) {
    return dp_mix32((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16) >>
           (32 - HASH_BITS);
}

static size_t match_length(const unsigned char *a, const unsigned char *b, size_t limit) {
    size_t len = 0;
    while (len < limit && a[len] == b[len]) len++;
    return len;
}

size_t dp_lz_compress(const unsigned char *in, size_t n, unsigned char *out, size_t cap) {
    static int32_t head[1 << HASH_BITS];
    static int32_t prev[WINDOW + 1];
    memset(head, -1, sizeof head);
    size_t ip = 0, op = 0, flag_pos = 0;
    int items = 8;
    while (ip < n) {
        if (items == 8) {
            if (op >= cap) return 0;
            flag_pos = op++;
            out[flag_pos] = 0;
            items = 0;
        }
        size_t best_len = 0, best_off = 0;
        if (ip + MIN_MATCH <= n) {
            uint32_t h = hash3(in + ip);
            int32_t cand = head[h];
            size_t limit = dp_min_size(MAX_MATCH, n - ip);
            for (int chain = 0; cand >= 0 && chain < MAX_CHAIN; chain++) {
                size_t off = ip - (size_t)cand;
                if (off > WINDOW) break;
                size_t len = match_length(in + cand, in + ip, limit);
                if (len > best_len) { best_len = len; best_off = off; }
                if (len == limit) break;
                cand = prev[cand % (WINDOW + 1)];
            }
            prev[ip % (WINDOW + 1)] = head[h];
            head[h] = (int32_t)ip;
        }
        if (best_len >= MIN_MATCH) {
            if (op + 3 > cap) return 0;
            out[flag_pos] |= (unsigned char)(1u << items);
            out[op++] = (unsigned char)(best_off & 0xff);
            out[op++] = (unsigned char)(best_off >> 8);
            out[op++] = (unsigned char)(best_len - MIN_MATCH);
            for (size_t k = 1; k < best_len && ip + k + MIN_MATCH <= n; k++) {
                uint32_t h = hash3(in + ip + k);
                prev[(ip + k) % (WINDOW + 1)] = head[h];
                head[h] = (int32_t)(ip + k);
            }
            ip += best_len;
        } else {
            if (op >= cap) return 0;
            out[op++] = in[ip++];
        }
        items++;
    }
    return op;
}

size_t dp_lz_decompress(const unsigned char *in, size_t n, unsigned char *out, size_t cap) {
    size_t ip = 0, op = 0;
    while (ip < n) {
        unsigned flags = in[ip++];
        for (int item = 0; item < 8 && ip < n; item++) {
            if (flags & (1u << item)) {
                if (ip + 3 > n) return 0;
                size_t off = (size_t)in[ip] | (size_t)in[ip + 1] << 8;
                size_t len = (size_t)in[ip + 2] + MIN_MATCH;
                ip += 3;
                if (off == 0 || off > op || op + len > cap) return 0;
                for (size_t k = 0; k < len; k++, op++) out[op] = out[op - off];
            } else {
                if (op >= cap) return 0;
                out[op++] = in[ip++];
            }
        }
    }
    return op;
}
