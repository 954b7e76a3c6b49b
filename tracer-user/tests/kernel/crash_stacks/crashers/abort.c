#include <stdio.h>
#include <stdlib.h>
static volatile int sink;
__attribute__((noinline)) void check_invariant(int x) { if (x < 5) abort(); sink = x; }
int main(int argc, char **argv) { check_invariant(argc); sink = 1; puts("ok"); return 0; }
