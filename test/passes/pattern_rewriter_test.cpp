// The pattern driver (passes/pattern_rewriter.h), with made-up patterns: what a pattern
// sees (definitions, current use counts), replacing results, emitted eqns offered to the
// patterns again, in-place rewrites retried, bodies, pruning, stats, and the errors for
// patterns that misbehave.
#include "passes/pattern_rewriter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "passes/simplify/accumulate_products.h"
#include "passes/simplify/canonicalize.h"
#include "passes/simplify/concat_windows.h"
#include "passes/simplify/index_runs.h"
#include "passes/simplify/move_windows.h"
#include "passes/simplify/simplify_dots.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"

namespace refjit {
namespace {

int count(const Jaxpr& j, Prim p) {
  int n = 0;
  for (const Eqn& e : j.eqns) n += e.prim == p;
  return n;
}

// neg(neg(x)) is x.
Rewritten double_negation(Eqn& e, Rewriter& r) {
  const Eqn* inner = r.def(e.ins[0]);
  if (!inner || inner->prim != Prim::neg) return Rewritten::no;
  return r.replace(e.outs[0], inner->ins[0]) ? Rewritten::replaced : Rewritten::no;
}

// sub(x, y) is add(x, neg(y)): emits a neg, which double_negation then sees.
Rewritten sub_as_add(Eqn& e, Rewriter& r) {
  const Var n = r.new_var(r.type_of(e.ins[1]));
  r.emit(Eqn{Prim::neg, {}, {e.ins[1]}, {n}});
  e.prim = Prim::add;
  e.ins[1] = n;
  return Rewritten::in_place;
}

// sin(x) where x is read only here becomes cos(x) (a stand-in for a rewrite that is only
// worth it for a value's sole reader).
Rewritten sole_sin_to_cos(Eqn& e, Rewriter& r) {
  if (r.use_count(e.ins[0]) != 1) return Rewritten::no;
  e.prim = Prim::cos;
  return Rewritten::in_place;
}

Rewritten same_computation(Eqn& e, Rewriter& r) {
  const Eqn* earlier = r.earlier_equal(e);
  if (!earlier) return Rewritten::no;
  const Var result = earlier->outs[0];
  return r.replace(e.outs[0], result) ? Rewritten::replaced : Rewritten::no;
}

const RewritePattern kPatterns[] = {
    {"double-negation", Prim::neg, double_negation},
    {"sub-as-add", Prim::sub, sub_as_add},
    {"sole-sin-to-cos", Prim::sin, sole_sin_to_cos},
    {"same-computation", std::nullopt, same_computation},
};

Jaxpr rewrite(const std::string& text, RewriteStats& stats, int* changes = nullptr) {
  Jaxpr j = parse_jaxpr(text);
  const int n = apply_patterns(j, kPatterns, &stats);
  if (changes) *changes = n;
  verify(j);
  return j;
}

TEST(PatternRewriter, ReplacedResultsAreReadThroughAndTheDeadIsPruned) {
  RewriteStats stats;
  const Jaxpr j = rewrite(R"({ lambda ; x:f32[3]. let
    a:f32[3] = neg x
    b:f32[3] = neg a
    c:f32[3] = exp b
  in (c,) })",
                          stats);
  // exp reads x; both negs are gone (the first became unread).
  ASSERT_EQ(j.eqns.size(), 1u);
  EXPECT_EQ(j.eqns[0].prim, Prim::exp);
  EXPECT_EQ(j.eqns[0].ins[0], Atom(j.invars[0]));
  EXPECT_EQ(stats.count("double-negation"), 1);
  EXPECT_EQ(stats.summary(), "double-negation 1");
}

TEST(PatternRewriter, EmittedEqnsMeetThePatternsFirst) {
  // x - neg(y): sub-as-add emits neg(neg(y)), which double-negation removes: x + y.
  RewriteStats stats;
  const Jaxpr j = rewrite(R"({ lambda ; x:f32[3] y:f32[3]. let
    n:f32[3] = neg y
    d:f32[3] = sub x n
  in (d,) })",
                          stats);
  ASSERT_EQ(j.eqns.size(), 1u) << print_jaxpr(j);
  EXPECT_EQ(j.eqns[0].prim, Prim::add);
  EXPECT_EQ(j.eqns[0].ins[1], Atom(j.invars[1]));
  EXPECT_EQ(stats.count("sub-as-add"), 1);
  EXPECT_EQ(stats.count("double-negation"), 1);
}

TEST(PatternRewriter, UseCountsFollowTheRewrites) {
  // a is read twice (by two sins) until the second sin is found equal to the first: its
  // results are the first's, and a's count drops to 1. The first sin had already been kept
  // when a had two readers, so it stays a sin; a third sin of `b`, read once, becomes cos.
  RewriteStats stats;
  const Jaxpr j = rewrite(R"({ lambda ; x:f32[3] b:f32[3]. let
    a:f32[3] = exp x
    s:f32[3] = sin a
    t:f32[3] = sin a
    u:f32[3] = add s t
    v:f32[3] = sin b
  in (u, v) })",
                          stats);
  EXPECT_EQ(stats.count("same-computation"), 1);
  EXPECT_EQ(stats.count("sole-sin-to-cos"), 1);
  EXPECT_EQ(count(j, Prim::sin), 1);
  EXPECT_EQ(count(j, Prim::cos), 1);
  const Eqn& add = j.eqns[2];
  ASSERT_EQ(add.prim, Prim::add);
  EXPECT_EQ(add.ins[0], add.ins[1]);  // both read the first sin
}

TEST(PatternRewriter, BodiesAreRewrittenWithTheSamePatterns) {
  RewriteStats stats;
  int changes = 0;
  const Jaxpr j = rewrite(R"({ lambda ; x:f32[] xs:f32[4]. let
    c:f32[] = scan[length=4 num_consts=0 num_carry=1 reverse=False linear=(False, False)
      unroll=1 jaxpr={ lambda ; acc:f32[] v:f32[]. let
        n:f32[] = neg v
        m:f32[] = neg n
        s:f32[] = add acc m
      in (s,) }] x xs
  in (c,) })",
                          stats, &changes);
  EXPECT_EQ(changes, 1);
  EXPECT_EQ(stats.count("double-negation"), 1);
  const Jaxpr& body = *j.eqns[0].params.get<JaxprPtr>("jaxpr");
  ASSERT_EQ(body.eqns.size(), 1u) << print_jaxpr(body);
  EXPECT_EQ(body.eqns[0].ins[1], Atom(body.invars[1]));
}

TEST(PatternRewriter, NothingToDoLeavesTheProgramAlone) {
  RewriteStats stats;
  int changes = -1;
  const Jaxpr j = rewrite(R"({ lambda ; x:f32[3]. let
    a:f32[3] = exp x
    dead:f32[3] = sin x
  in (a,) })",
                          stats, &changes);
  EXPECT_EQ(changes, 0);
  EXPECT_EQ(stats.total(), 0);
  EXPECT_EQ(stats.summary(), "");
  EXPECT_EQ(j.eqns.size(), 2u);  // pruning comes only with a rewrite
}

TEST(PatternRewriter, ReplacingWithAnotherTypeIsRefused) {
  RewriteStats stats;
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3] y:f32[]. let
    a:f32[3] = exp x
  in (a,) })");
  const RewritePattern wrong[] = {{"wrong-type", Prim::exp, [](Eqn& e, Rewriter& r) {
                                     const Var scalar = r.jaxpr().invars[1];
                                     return r.replace(e.outs[0], scalar) ? Rewritten::replaced
                                                                         : Rewritten::no;
                                   }}};
  EXPECT_EQ(apply_patterns(j, wrong, &stats), 0);
  EXPECT_EQ(j.eqns.size(), 1u);
}

TEST(PatternRewriter, PatternsThatUndoEachOtherAreCaught) {
  // exp -> log -> exp -> ... in place, forever.
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3]. let
    a:f32[3] = exp x
  in (a,) })");
  const RewritePattern flip[] = {{"exp-to-log", Prim::exp,
                                  [](Eqn& e, Rewriter&) {
                                    e.prim = Prim::log;
                                    return Rewritten::in_place;
                                  }},
                                 {"log-to-exp", Prim::log, [](Eqn& e, Rewriter&) {
                                    e.prim = Prim::exp;
                                    return Rewritten::in_place;
                                  }}};
  // In place, it says which primitive the eqn had last.
  try {
    apply_patterns(j, flip);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("in place"), std::string::npos) << err.what();
  }

  // Emitting, it says which primitive kept coming back.
  Jaxpr k = parse_jaxpr(R"({ lambda ; x:f32[3]. let
    a:f32[3] = exp x
  in (a,) })");
  const RewritePattern loop[] = {{"re-emit", Prim::exp, [](Eqn& e, Rewriter& r) {
                                    r.emit(e);
                                    return Rewritten::replaced;
                                  }}};
  try {
    apply_patterns(k, loop);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("exp"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("undo each other"), std::string::npos) << err.what();
  }
}

TEST(PatternRewriter, EmittingWithoutRewritingIsAnError) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3]. let
    a:f32[3] = exp x
  in (a,) })");
  const RewritePattern bad[] = {
      {"emits-and-declines", Prim::exp, [](Eqn& e, Rewriter& r) {
         r.emit(Eqn{Prim::sin, {}, {e.ins[0]}, {r.new_var(r.type_of(e.ins[0]))}});
         return Rewritten::no;
       }}};
  EXPECT_THROW(apply_patterns(j, bad), Error);
}

TEST(PatternRewriter, PureEqns) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3] r:Ref{f32[3]}. let
    a:f32[3] = exp x
    b:f32[3] <- r[...]
  in (a, b) })");
  EXPECT_TRUE(is_pure(j, j.eqns[0]));
  EXPECT_FALSE(is_pure(j, j.eqns[1]));  // reads a ref
}

// Every pattern of the pipeline's pattern passes has its lit test,
// test/lit/patterns/<name>.jaxpr (dashes as underscores), which checks that it applied, and an
// entry in docs/pipeline.md; every file there tests a pattern that exists.
TEST(PatternRewriter, EveryPatternHasItsLitTestAndItsDocumentation) {
  namespace fs = std::filesystem;
  const char* data = std::getenv("REFJIT_TEST_DATA");
  const fs::path test_dir = data ? fs::path(data) : fs::path(__FILE__).parent_path().parent_path();
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string docs = read(test_dir / ".." / "docs" / "pipeline.md");
  ASSERT_FALSE(docs.empty());
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(test_dir / "lit" / "patterns"))
    if (entry.path().extension() == ".jaxpr") files.insert(entry.path().stem().string());
  std::set<std::string> names;
  for (auto patterns :
       {canonicalize_patterns(), simplify_dots_patterns(), accumulate_products_patterns(),
        move_windows_patterns(), concat_windows_patterns(), index_runs_patterns()})
    for (const RewritePattern& p : patterns) names.insert(std::string(p.name));
  for (const std::string& name : names) {
    std::string file = name;
    for (char& c : file)
      if (c == '-') c = '_';
    EXPECT_TRUE(files.erase(file)) << "no test/lit/patterns/" << file << ".jaxpr";
    const std::string text = read(test_dir / "lit" / "patterns" / (file + ".jaxpr"));
    EXPECT_NE(text.find("# rewrites: "), std::string::npos) << file;
    EXPECT_NE(text.find(name + " "), std::string::npos) << file << " does not check " << name;
    EXPECT_NE(docs.find("`" + name + "`"), std::string::npos)
        << "docs/pipeline.md does not list " << name;
  }
  EXPECT_TRUE(files.empty()) << "test/lit/patterns/" << *files.begin() << ".jaxpr tests no pattern";
}

}  // namespace
}  // namespace refjit
