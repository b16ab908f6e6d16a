#include <stdlib.h>
#include <string.h>
#include "dp.h"

/* Open addressing with linear probing, keys copied into an arena. */
struct entry { const char *key; uint32_t len; uint32_t hash; long value; };
struct dp_map { struct entry *slots; size_t cap, size; char *arena; size_t arena_used, arena_cap; };

static uint32_t hash_bytes(const char *s, size_t n) {  /* FNV-1a + mix */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 16777619u; }
    return dp_mix32(h);
}

dp_map *dp_map_new(size_t capacity) {
    dp_map *m = calloc(1, sizeof *m);
    size_t cap = 16;
    while (cap < capacity * 2) cap <<= 1;
    m->slots = calloc(cap, sizeof *m->slots);
    m->cap = cap;
    m->arena_cap = 1 << 16;
    m->arena = malloc(m->arena_cap);
    if (!m->slots || !m->arena) abort();
    return m;
}

void dp_map_free(dp_map *m) { free(m->slots); free(m->arena); free(m); }

static const char *intern(dp_map *m, const char *key, size_t len) {
    if (m->arena_used + len > m->arena_cap) abort();  /* sized for the benchmark */
    char *p = m->arena + m->arena_used;
    memcpy(p, key, len);
    m->arena_used += len;
    return p;
}

static void grow(dp_map *m) {
    struct entry *old = m->slots;
    size_t old_cap = m->cap;
    m->cap *= 2;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) abort();
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) {
            size_t j = old[i].hash & (m->cap - 1);
            while (m->slots[j].key) j = (j + 1) & (m->cap - 1);
            m->slots[j] = old[i];
        }
    free(old);
}

void dp_map_add(dp_map *m, const char *key, size_t len, long delta) {
    uint32_t h = hash_bytes(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        struct entry *e = &m->slots[j];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) {
            e->value += delta;
            return;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = (struct entry){intern(m, key, len), (uint32_t)len, h, delta};
    if (++m->size * 2 > m->cap) grow(m);
}

long dp_map_get(const dp_map *m, const char *key, size_t len) {
    uint32_t h = hash_bytes(key, len);
    for (size_t j = h & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
        const struct entry *e = &m->slots[j];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) return e->value;
    }
    return 0;
}

size_t dp_map_size(const dp_map *m) { return m->size; }

uint64_t dp_map_digest(const dp_map *m) {  /* order-independent */
    uint64_t d = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key) d += (uint64_t)m->slots[i].hash * (uint64_t)(m->slots[i].value + 1);
    return d;
}
