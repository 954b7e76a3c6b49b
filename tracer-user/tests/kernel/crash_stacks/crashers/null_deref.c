#include <stdio.h>
#include <stdlib.h>
struct header { int magic; };
static volatile int sink;
__attribute__((noinline)) int parse_header(struct header *h) { return h->magic * 3; }
__attribute__((noinline)) int load_file(const char *path) {
    struct header *h = path[0] == 'x' ? malloc(sizeof *h) : NULL;
    int r = parse_header(h);
    sink = r;
    return r + 1;
}
int main(int argc, char **argv) {
    int r = load_file(argc > 5 ? "x" : "y");
    sink = r;
    printf("%d\n", r);
    return 0;
}
