static __thread int counter;
int bump(void) { return ++counter; }
