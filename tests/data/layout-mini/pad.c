/* Code of assorted sizes around spin(), so that the linker's orders of the input
 * sections put spin() at many places. */
unsigned pad_a(unsigned x) { return x * 3 + 1; }
unsigned pad_b(unsigned x) { unsigned s = 0; for (unsigned i = 0; i < x; i++) s ^= i * 7; return s; }
unsigned pad_c(unsigned x) { return (x << 3) ^ (x >> 2) ^ 0x5bd1e995u; }
unsigned pad_d(unsigned x) { unsigned s = 1; for (unsigned i = 1; i < x; i++) s = s * i + x; return s; }
