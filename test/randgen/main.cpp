// randgen_tests: the GoogleTest binary of this folder, and the random-program driver.
//   randgen_tests [gtest flags]                       the bounded gtests (CI)
//   randgen_tests randtest COUNT [SEED] [--no-native] [--no-autodiff]
// The driver checks programs SEED .. SEED+COUNT-1, prints each mismatching program with the
// seed that reproduces it, and ends with `randtest: N programs, M mismatches` (exit 1 if M > 0).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "test/randgen/checks.h"

namespace {

int randtest(int argc, char** argv) {
  using namespace refjit::randgen;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s randtest COUNT [SEED] [--no-native] [--no-autodiff]\n",
                 argv[0]);
    return 2;
  }
  const long count = std::strtol(argv[2], nullptr, 10);
  uint64_t seed = 1;
  CheckOptions options;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-native")
      options.native = false;
    else if (a == "--no-autodiff")
      options.autodiff = false;
    else
      seed = std::strtoull(a.c_str(), nullptr, 10);
  }
  Tally tally;
  size_t reported = 0;
  for (long k = 0; k < count; ++k) {
    check_seed(seed + k, options, tally);
    for (; reported < tally.mismatches.size(); ++reported) {
      const Mismatch& m = tally.mismatches[reported];
      std::printf(
          "MISMATCH seed=%llu check=%s\n%s\nprogram (reproduce: scripts/randtest.sh 1 "
          "%llu):\n%s\n\n",
          static_cast<unsigned long long>(m.seed), m.check.c_str(), m.detail.c_str(),
          static_cast<unsigned long long>(m.seed), m.program.c_str());
      std::fflush(stdout);
    }
  }
  for (const auto& [check, n] : tally.ran) {
    const int skipped = tally.skipped.count(check) ? tally.skipped.at(check) : 0;
    std::printf("  %-24s ran %d, declined %d%s%s\n", check.c_str(), n, skipped,
                skipped ? " (first: " : "",
                skipped ? (tally.first_skip_reason.at(check).substr(0, 160) + ")").c_str() : "");
  }
  for (const auto& [decision, n] : tally.decided_with)
    std::printf("  decided programs with %s: %d\n", decision.c_str(), n);
  for (const auto& [decision, n] : tally.transposed_with)
    std::printf("  transposed programs with %s: %d\n", decision.c_str(), n);
  std::printf("randtest: %d programs, %zu mismatches\n", tally.programs, tally.mismatches.size());
  return tally.mismatches.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "randtest") return randtest(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
