/* Loads the plugin named by argv[2] (default ./libplug.so) and runs its work(). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    const char *path = argc > 2 ? argv[2] : "./libplug.so";
    void *h = dlopen(path, RTLD_NOW);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    unsigned (*work)(long) = (unsigned (*)(long))dlsym(h, "work");
    printf("%u\n", work(argc > 1 ? atol(argv[1]) : 1000));
    return 0;
}
