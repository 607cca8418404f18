// bamboo-bench: every benchmark in one program, so that a build parses the
// headers of LibTorch and CAF for them a few times instead of once each.
// `bamboo-bench NAME [options]`, or the program under the name
// bamboo-bench-NAME (the build makes those links; bench/run calls them).
#include <cstdio>
#include <string>

namespace bamboo::bench {
#define BAMBOO_BENCH(name)                                                               \
  namespace name##_bench {                                                               \
    int bench_main(int argc, char** argv);                                               \
  }
#include "bench/benches.def"
#undef BAMBOO_BENCH
} // namespace bamboo::bench

namespace {

struct entry {
  const char* name;
  int (*run)(int, char**);
};

constexpr entry benches[] = {
#define BAMBOO_BENCH(name) {#name, &bamboo::bench::name##_bench::bench_main},
#include "bench/benches.def"
#undef BAMBOO_BENCH
};

int usage(const char* why) {
  std::fprintf(stderr,
               "bamboo-bench: %s\nusage: bamboo-bench NAME [options] (or "
               "bamboo-bench-NAME [options]), NAME one of:",
               why);
  for (const auto& b : benches)
    std::fprintf(stderr, " %s", b.name);
  std::fprintf(stderr, "\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::string prog = argv[0];
  prog = prog.substr(prog.find_last_of('/') + 1);
  const std::string prefix = "bamboo-bench-";
  std::string name, self;
  if (prog.rfind(prefix, 0) == 0) {
    name = prog.substr(prefix.size());
  } else {
    if (argc < 2)
      return usage("which benchmark?");
    name = argv[1];
    self = "bamboo-bench " + name; // what the benchmark's --help calls it
    --argc, ++argv;
    argv[0] = self.data();
  }
  for (const auto& b : benches)
    if (name == b.name)
      return b.run(argc, argv);
  return usage(("no benchmark named '" + name + "'").c_str());
}
