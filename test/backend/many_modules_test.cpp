// Many compiled programs alive and dying in one process, as in a long Python session: every
// one's code must still reach its own constants. (With RuntimeDyld's per-section mappings,
// code and its constant pool drifted more than 2 GB apart after a few hundred compiles, and a
// PC-relative constant load crashed; the JIT now links each object into one block.)
#include <fmt/format.h>

#include "test_util.h"

namespace refjit::testing {
namespace {

TEST(NativeModules, HundredsOfProgramsKeepTheirConstants) {
  std::vector<CompiledFunction> alive;
  for (int k = 0; k < 300; ++k) {
    // Distinct float constants, so each module has a constant pool of its own.
    const double c = 1.0 + k / 7.0;
    Jaxpr j = parse_jaxpr(fmt::format(
        "{{ lambda ; x:f64[8] y:c128[4]. let a:f64[8] = mul x {0}:f64[] b:f64[8] = sin a "
        "c:c128[4] = mul y ({1}+0.5j):c128[] in (b, c) }}",
        c, c + 1));
    CompiledFunction f = compile_native(j, {.opt_level = 2});
    std::vector<RtValue> args{random_array(at(DType::f64, {8}), k),
                              random_array(at(DType::c128, {4}), k + 1)};
    std::vector<RtValue> want = interpret(j, args);
    std::vector<RtValue> got = f(args);
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(as_array(got[i]), as_array(want[i]), 1e-12, fmt::format("program {}", k));
    // Keep every third alive, free the rest: the address space fragments as in a session.
    if (k % 3 == 0) alive.push_back(std::move(f));
  }
  for (CompiledFunction& f : alive) {  // the survivors still run
    std::vector<RtValue> args{random_array(at(DType::f64, {8}), 1),
                              random_array(at(DType::c128, {4}), 2)};
    EXPECT_EQ(f(args).size(), 2u);
  }
}

}  // namespace
}  // namespace refjit::testing
