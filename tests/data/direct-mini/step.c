/* Exported, and not inlined: a call to it from inside the library goes through the PLT
   unless the library binds its own functions (the direct step). */
__attribute__((noinline)) unsigned long step(unsigned long acc, unsigned long x) {
    return acc * 31 + x;
}
