// diskformer CLI entry point (subcommands are being built).
#include <cstdio>
int main() {
  std::fprintf(stderr, "diskformer: under construction\n");
  return 1;
}
