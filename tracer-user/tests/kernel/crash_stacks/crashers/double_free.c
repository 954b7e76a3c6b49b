#include <stdio.h>
#include <stdlib.h>
static volatile int sink;
__attribute__((noinline)) void release_twice(char *p) { free(p); sink = p[0]; free(p); sink = 2; }
int main(int argc, char **argv) {
    char *p = malloc(32);
    p[0] = (char)argc;
    release_twice(p);
    puts("ok");
    return 0;
}
