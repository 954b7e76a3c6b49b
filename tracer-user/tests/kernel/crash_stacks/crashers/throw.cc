#include <stdexcept>
static volatile int sink;
__attribute__((noinline)) void validate(int x) { if (x < 5) throw std::runtime_error("bad input"); sink = x; }
int main(int argc, char **) { validate(argc); sink = 1; return 0; }
