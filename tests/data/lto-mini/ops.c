/* Operations on two words, selected by `op`. */
unsigned apply(unsigned op, unsigned a, unsigned b) {
    switch (op) {
    case 0: return a + b * 3u;
    case 1: a ^= b; a *= 0x9e3779b1u; return a ^ (a >> 15);
    case 2: return (a << (b & 7)) | (a >> (32 - (b & 7)));
    case 3: return a * 2654435761u + (b ^ (b >> 3));
    case 4: return (a ^ 0xdeadbeefu) + (b << 5) - (b >> 2);
    case 5: return a - b * 7u + (a >> 11);
    case 6: a += b; a ^= a << 13; a ^= a >> 17; return a ^ (a << 5);
    case 7: return (a & 0xffff) * (b | 1) + (a >> 16);
    default: return a + 1;
    }
}
