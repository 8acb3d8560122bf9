// Bounded runs of the random-program checks (the long runs are scripts/randtest.sh), and
// properties of the generator itself.
#include "test/randgen/randgen.h"

#include <gtest/gtest.h>

#include <set>

#include "ir/sub_jaxprs.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "test/randgen/checks.h"

namespace refjit::randgen {
namespace {

std::string report(const Tally& t) {
  std::string s;
  for (const Mismatch& m : t.mismatches)
    s += "seed " + std::to_string(m.seed) + " " + m.check + ": " + m.detail + "\n" + m.program +
         "\n";
  return s;
}

TEST(RandGen, SameSeedGivesSameProgram) {
  for (uint64_t seed : {1, 2, 77}) {
    EXPECT_EQ(print_jaxpr(generate(seed).jaxpr), print_jaxpr(generate(seed).jaxpr));
  }
}

TEST(RandGen, ProgramsVerifyAndDiffer) {
  std::set<std::string> texts;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Program p = generate(seed);
    EXPECT_NO_THROW(verify(p.jaxpr)) << seed;
    EXPECT_EQ(p.args.size(), p.jaxpr.invars.size());
    texts.insert(print_jaxpr(p.jaxpr));
  }
  EXPECT_GT(texts.size(), 45u);
}

TEST(RandGen, CoversRefsAndControlFlow) {
  std::set<Prim> seen;
  std::function<void(const Jaxpr&)> walk = [&](const Jaxpr& j) {
    for (const Eqn& e : j.eqns) {
      seen.insert(e.prim);
      for_each_sub_jaxpr(e, walk);
    }
  };
  for (uint64_t seed = 1; seed <= 300; ++seed) walk(generate(seed).jaxpr);
  for (Prim p : {Prim::scan,
                 Prim::cond,
                 Prim::new_ref,
                 Prim::get,
                 Prim::swap,
                 Prim::addupdate,
                 Prim::dot_general,
                 Prim::dynamic_slice,
                 Prim::dynamic_update_slice,
                 Prim::broadcast_in_dim,
                 Prim::reshape,
                 Prim::transpose,
                 Prim::slice,
                 Prim::select_n,
                 Prim::reduce_sum,
                 Prim::log,
                 Prim::freeze,
                 Prim::gather,
                 Prim::scatter_add,
                 Prim::concatenate,
                 Prim::pad,
                 Prim::iota,
                 Prim::jit,
                 Prim::div})
    EXPECT_TRUE(seen.count(p)) << prim_name(p);
}

TEST(RandGen, DifferentiableProgramsHaveNoStopGradient) {
  GenOptions o;
  o.float_dtype = DType::f64;
  o.differentiable = true;
  for (uint64_t seed = 1; seed <= 100; ++seed)
    EXPECT_EQ(print_jaxpr(generate(seed, o).jaxpr).find("stop_gradient"), std::string::npos);
}

// Text round trip, interpreter, JVP vs finite differences and the transpose identity.
TEST(RandTest, InterpreterAndAutodiffAgreeOn200Programs) {
  Tally t;
  CheckOptions o;
  o.native = false;
  for (uint64_t seed = 1; seed <= 200; ++seed) check_seed(seed, o, t);
  EXPECT_EQ(t.programs, 200);
  EXPECT_EQ(t.ran["roundtrip/f32"], 200);
  EXPECT_TRUE(t.mismatches.empty()) << report(t);
  // The transpose rules' own decisions are exercised, not only generated for: a rule that
  // stopped writing them would fall back to plain eqns that agree as well.
  for (const char* d : {"shift_add/f64", "get_flat_run/f64", "swap_flat_run/f64"})
    EXPECT_GT(t.transposed_with[d], 0) << d << " in no transposed program\n" << report(t);
}

// The native backend against the interpreter (fewer programs: each one is compiled).
TEST(RandTest, NativeBackendAgreesWithInterpreterOn30Programs) {
  Tally t;
  CheckOptions o;
  o.autodiff = false;
  o.native_opt_level = 0;
  for (uint64_t seed = 1000; seed < 1030; ++seed) check_seed(seed, o, t);
  EXPECT_GT(t.ran["native/f32"], 0);
  EXPECT_TRUE(t.mismatches.empty()) << report(t);
}

}  // namespace
}  // namespace refjit::randgen
