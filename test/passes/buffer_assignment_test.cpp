// Buffer assignment: in-place updates, copies and their sizes, carries, refs, the seed's
// insert/pop programs (seeds/grad-scan-slice-update-slow.txt).
#include "passes/buffers/buffer_assignment.h"

#include <gtest/gtest.h>

#include <string>

#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit {
namespace {

Jaxpr parse(const std::string& text) { return parse_jaxpr(text, "<test>"); }

// The var of `j` named `name` in the parsed text.
Var var_named(const Jaxpr& j, const std::string& name) {
  for (size_t i = 0; i < j.vars.size(); ++i)
    if (j.vars[i].name == name) return Var{static_cast<uint32_t>(i)};
  ADD_FAILURE() << "no var " << name;
  return Var{};
}

int buffer_of(const JaxprBuffers& p, const Jaxpr& j, const std::string& name) {
  return p.buffer_of_var.at(var_named(j, name).id);
}

std::vector<const Copy*> copies_of(const JaxprBuffers& p, CopyKind kind) {
  std::vector<const Copy*> v;
  for (const EqnBuffers& e : p.eqns)
    for (const Copy& c : e.copies)
      if (c.kind == kind) v.push_back(&c);
  for (const Copy& c : p.end_copies)
    if (c.kind == kind) v.push_back(&c);
  return v;
}

const Jaxpr& scan_body(const Jaxpr& j, size_t eqn) {
  return *j.eqns.at(eqn).params.get<JaxprPtr>("jaxpr");
}

std::string scan_of(const std::string& body, const std::string& outs, const std::string& ins,
                    int length, int num_consts, int num_carry, int num_operands) {
  std::string linear = "(";
  for (int k = 0; k < num_operands; ++k) linear += k ? ", False" : "False";
  linear += num_operands == 1 ? ",)" : ")";
  return outs + " = scan[\n  _split_transpose=False\n  jaxpr=" + body +
         "\n  length=" + std::to_string(length) + "\n  linear=" + linear +
         "\n  num_carry=" + std::to_string(num_carry) +
         "\n  num_consts=" + std::to_string(num_consts) + "\n  reverse=False\n  unroll=1\n] " + ins;
}

// ---------------------------------------------------------------- straight-line programs

TEST(BufferAssignment, UpdateOfDeadInternalValueIsInPlace) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
    c:f32[8] = sin a
    d:f32[8] = dynamic_update_slice c b i
  in (d,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  EXPECT_EQ(p.eqns[1].action, EqnAction::in_place);
  EXPECT_EQ(p.eqns[1].in_place[0], 0);
  EXPECT_EQ(buffer_of(p, j, "d"), buffer_of(p, j, "c"));
  EXPECT_EQ(p.buffers.at(buffer_of(p, j, "d")).home, 0);  // computed straight into output 0
  EXPECT_TRUE(plan.all_copies().empty());
}

TEST(BufferAssignment, UpdateOfLiveValueCopiesItOnceOutsideLoops) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
    c:f32[8] = sin a
    d:f32[8] = dynamic_update_slice c b i
    e:f32[8] = add c d
  in (e,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  EXPECT_EQ(p.eqns[1].action, EqnAction::fresh);
  EXPECT_NE(buffer_of(p, j, "d"), buffer_of(p, j, "c"));
  ASSERT_EQ(p.eqns[1].copies.size(), 1u);
  const Copy& c = p.eqns[1].copies[0];
  EXPECT_EQ(c.kind, CopyKind::whole);
  EXPECT_EQ(c.bytes, 32);
  EXPECT_FALSE(c.in_loop);
  EXPECT_EQ(c.src, buffer_of(p, j, "c"));
  EXPECT_EQ(c.dst, buffer_of(p, j, "d"));
  ASSERT_TRUE(c.value.has_value());
  EXPECT_EQ(*c.value, var_named(j, "c"));
  EXPECT_EQ(plan.stats().whole_outside, 1);
  // The add may overwrite `c` (dead afterwards): `e` lives in c's buffer.
  EXPECT_EQ(p.eqns[2].action, EqnAction::in_place);
  EXPECT_EQ(buffer_of(p, j, "e"), buffer_of(p, j, "c"));
}

TEST(BufferAssignment, UpdateOfNonDonatedInputCopiesOnce) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
    d:f32[8] = dynamic_update_slice a b i
  in (d,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  CopyStats s = plan.stats();
  EXPECT_EQ(s.whole_outside, 1);
  EXPECT_EQ(s.whole_outside_bytes, 32);
  EXPECT_EQ(s.whole_in_loop, 0);
  ASSERT_EQ(p.eqns[0].copies.size(), 1u);
  EXPECT_EQ(p.eqns[0].copies[0].src, buffer_of(p, j, "a"));
  EXPECT_NE(p.eqns[0].copies[0].why.find("not donated"), std::string::npos)
      << p.eqns[0].copies[0].why;
  EXPECT_EQ(p.buffers.at(buffer_of(p, j, "d")).home, 0);  // the copy lands in output 0
  EXPECT_TRUE(p.end_copies.empty());
}

TEST(BufferAssignment, UpdateOfDonatedInputIsInPlaceAndReturnsTheInput) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
    d:f32[8] = dynamic_update_slice a b i
  in (d,) })");
  BufferOptions o;
  o.donated = {true, false, false};
  BufferAssignment plan = assign_buffers(j, o);
  const JaxprBuffers& p = plan.top();
  EXPECT_EQ(p.eqns[0].action, EqnAction::in_place);
  int a = buffer_of(p, j, "a");
  EXPECT_EQ(buffer_of(p, j, "d"), a);
  EXPECT_EQ(p.buffers[a].origin, BufferOrigin::input);
  EXPECT_EQ(p.buffers[a].home, 0);  // output 0 aliases donated input 0
  EXPECT_TRUE(plan.all_copies().empty());
}

TEST(BufferAssignment, ReturningANonDonatedInputCopiesIt) {
  Jaxpr j = parse(R"({ lambda ; a:f32[3]. let  in (a,) })");
  BufferAssignment plan = assign_buffers(j);
  ASSERT_EQ(plan.top().end_copies.size(), 1u);
  EXPECT_EQ(plan.top().end_copies[0].kind, CopyKind::whole);
  EXPECT_EQ(plan.top().end_copies[0].bytes, 12);
}

TEST(BufferAssignment, ViewsShareTheBufferSoLivenessIsPerBuffer) {
  // `v` is a reshape of `c`: updating `c` in place would change `v`, which is used later.
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
    c:f32[8] = sin a
    v:f32[2,4] = reshape[dimensions=None new_sizes=(2, 4)] c
    d:f32[8] = dynamic_update_slice c b i
    w:f32[2,4] = cos v
  in (d, w) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  EXPECT_EQ(buffer_of(p, j, "v"), buffer_of(p, j, "c"));
  EXPECT_EQ(p.eqns[1].action, EqnAction::view);
  EXPECT_EQ(p.eqns[2].action, EqnAction::fresh);
  ASSERT_EQ(p.eqns[2].copies.size(), 1u);
  EXPECT_NE(p.eqns[2].copies[0].why.find("eqn 3"), std::string::npos) << p.eqns[2].copies[0].why;
}

TEST(BufferAssignment, UpdateReadingItsOwnBufferIsNotInPlace) {
  // The update is a view of the operand's buffer: writing in place would read what it writes.
  Jaxpr j = parse(R"({ lambda ; a:f32[1,4] i:i32[]. let
    c:f32[1,4] = sin a
    u:f32[1,4] = copy c
    d:f32[1,4] = dynamic_update_slice c u 0:i32[] i
  in (d,) })");
  BufferAssignment plan = assign_buffers(j);
  EXPECT_EQ(plan.top().eqns[2].action, EqnAction::fresh);
  EXPECT_EQ(plan.stats().whole_outside, 1);
}

// ---------------------------------------------------------------- refs

TEST(BufferAssignment, WholeGetThenWholeSwapIsAMove) {
  Jaxpr j = parse(R"({ lambda ; r:Ref{f32[8]} b:f32[2] i:i32[]. let
    x:f32[8] <- r[...]
    y:f32[8] = dynamic_update_slice x b i
    r[...] <- y
  in () })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  int R = buffer_of(p, j, "r");
  EXPECT_EQ(buffer_of(p, j, "x"), R);
  EXPECT_EQ(buffer_of(p, j, "y"), R);
  EXPECT_EQ(p.eqns[0].action, EqnAction::view);
  EXPECT_EQ(p.eqns[1].action, EqnAction::in_place);
  EXPECT_EQ(p.eqns[2].action, EqnAction::no_op);
  EXPECT_TRUE(plan.all_copies().empty());
}

TEST(BufferAssignment, WholeGetCopiesWhenTheValueOutlivesAWrite) {
  Jaxpr j = parse(R"({ lambda ; r:Ref{f32[8]} b:f32[8]. let
    x:f32[8] <- r[...]
    r[...] <- b
    z:f32[8] = sin x
  in (z,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  EXPECT_NE(buffer_of(p, j, "x"), buffer_of(p, j, "r"));
  ASSERT_EQ(p.eqns[0].copies.size(), 1u);
  EXPECT_EQ(p.eqns[0].copies[0].kind, CopyKind::whole);
  EXPECT_EQ(p.eqns[0].copies[0].bytes, 32);
  // The write of the input `b` into the ref is itself a whole copy (b stays the caller's).
  ASSERT_EQ(p.eqns[1].copies.size(), 1u);
  EXPECT_EQ(p.eqns[1].copies[0].src, buffer_of(p, j, "b"));
  EXPECT_EQ(plan.stats().whole_outside, 2);
}

TEST(BufferAssignment, FreshValueWrittenWholeIntoARefIsComputedInIt) {
  Jaxpr j = parse(R"({ lambda ; r:Ref{f32[8]} a:f32[8]. let
    y:f32[8] = sin a
    r[...] <- y
  in () })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  EXPECT_EQ(buffer_of(p, j, "y"), buffer_of(p, j, "r"));
  EXPECT_EQ(p.eqns[1].action, EqnAction::no_op);
  EXPECT_TRUE(plan.all_copies().empty());
}

TEST(BufferAssignment, IndexedRefReadsAreCopiesOfTheReadSize) {
  Jaxpr j = parse(R"({ lambda ; r:Ref{f32[4,8]} i:i32[] v:f32[8]. let
    x:f32[8] <- r[i]
    r[i] <- v
    r[0] += x
  in () })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  ASSERT_EQ(p.eqns[0].copies.size(), 1u);
  EXPECT_EQ(p.eqns[0].copies[0].kind, CopyKind::read);
  EXPECT_EQ(p.eqns[0].copies[0].bytes, 32);
  EXPECT_EQ(p.eqns[1].action, EqnAction::in_place);
  EXPECT_EQ(p.eqns[2].action, EqnAction::in_place);
  EXPECT_EQ(plan.stats().whole_outside + plan.stats().whole_in_loop, 0);
}

TEST(BufferAssignment, NewRefTakesOverADeadValue) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8]. let
    z:f32[8] = sin a
    r:Ref{f32[8]} = new_ref z
    r[0] += 1.0:f32[]
    w:f32[8] = freeze r
  in (w,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& p = plan.top();
  EXPECT_EQ(p.eqns[1].action, EqnAction::move);
  EXPECT_EQ(buffer_of(p, j, "r"), buffer_of(p, j, "z"));
  EXPECT_EQ(buffer_of(p, j, "w"), buffer_of(p, j, "z"));
  EXPECT_TRUE(plan.all_copies().empty());
}

// ---------------------------------------------------------------- scans (the seed)

// simple_insert / slice1 with N_COLS = 4 (state f32[4,9]).
const std::string kSlice1Body = R"({ lambda ; c:f32[4,9] row:i32[] col:i32[] v:f32[]. let
      sl:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] c row col
      vb:f32[1,1] = broadcast_in_dim v
      u:f32[1,5] = concatenate[dimension=1] vb sl
      c2:f32[4,9] = dynamic_update_slice c u row col
    in (c2,) })";

std::string slice1_program() {
  return "{ lambda ; s:f32[4,9] rows:i32[6] cols:i32[6] vals:f32[6]. let\n" +
         scan_of(kSlice1Body, "r:f32[4,9]", "s rows cols vals", 6, 0, 1, 4) + "\n in (r,) }";
}

TEST(BufferAssignment, Slice1InsertScanUpdatesTheCarryInPlace) {
  Jaxpr j = parse(slice1_program());
  BufferAssignment plan = assign_buffers(j);
  const Jaxpr& body = scan_body(j, 0);
  const JaxprBuffers& bp = plan.of(body);
  EXPECT_TRUE(bp.in_loop);
  EXPECT_EQ(bp.eqns[3].action, EqnAction::in_place);
  int c = buffer_of(bp, body, "c");
  EXPECT_EQ(bp.buffers[c].origin, BufferOrigin::carry);
  EXPECT_EQ(buffer_of(bp, body, "c2"), c);
  EXPECT_TRUE(copies_of(bp, CopyKind::whole).empty());
  auto reads = copies_of(bp, CopyKind::read);
  ASSERT_EQ(reads.size(), 1u);  // the row slice, 4 floats
  EXPECT_EQ(reads[0]->bytes, 16);
  EXPECT_TRUE(reads[0]->in_loop);
  // The carry buffer is the scan's result, which is output 0; the non-donated initial state
  // is copied into it once, before the loop.
  const JaxprBuffers& top = plan.top();
  EXPECT_EQ(bp.buffers[c].outer, buffer_of(top, j, "r"));
  CopyStats s = plan.stats();
  EXPECT_EQ(s.whole_in_loop, 0);
  EXPECT_EQ(s.whole_outside, 1);
  EXPECT_EQ(s.whole_outside_bytes, 4 * 9 * 4);
}

TEST(BufferAssignment, Slice1InsertScanOnDonatedStateCopiesNothing) {
  Jaxpr j = parse(slice1_program());
  BufferOptions o;
  o.donated = {true};
  o.fail_on_copy = true;
  BufferAssignment plan = assign_buffers(j, o);
  CopyStats s = plan.stats();
  EXPECT_EQ(s.whole_in_loop + s.whole_outside, 0);
  EXPECT_EQ(plan.top().eqns[0].in_place[0], 0);  // carry 0 stays in operand 0's buffer
  EXPECT_EQ(buffer_of(plan.top(), j, "r"), buffer_of(plan.top(), j, "s"));
}

const std::string kSlowPopBody = R"({ lambda ; c:f32[4,9] row:i32[] col:i32[]. let
      v1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] c row col
      v:f32[] = squeeze[dimensions=(0, 1)] v1
      col1:i32[] = add col 1:i32[]
      u:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] c row col1
      c2:f32[4,9] = dynamic_update_slice c u row col
    in (c2, v) })";

const std::string kFastPopBody = R"({ lambda ; c:f32[4,9] row:i32[] col:i32[]. let
      v1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] c row col
      c1:f32[4,9] = dynamic_update_slice c v1 row 8:i32[]
      col1:i32[] = add col 1:i32[]
      u:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] c1 row col1
      c2:f32[4,9] = dynamic_update_slice c1 u row col
      w1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] c2 row 8:i32[]
      w:f32[] = squeeze[dimensions=(0, 1)] w1
    in (c2, w) })";

std::string pop_program(const std::string& body) {
  return "{ lambda ; s:f32[4,9] rows:i32[6] cols:i32[6]. let\n" +
         scan_of(body, "r:f32[4,9] ys:f32[6]", "s rows cols", 6, 0, 1, 3) + "\n in (r, ys) }";
}

TEST(BufferAssignment, SlowPopCopiesOnlyTheScalarItReads) {
  Jaxpr j = parse(pop_program(kSlowPopBody));
  BufferOptions o;
  o.donated = {true};
  o.fail_on_copy = true;  // no whole-buffer copy in the loop
  BufferAssignment plan = assign_buffers(j, o);
  const Jaxpr& body = scan_body(j, 0);
  const JaxprBuffers& bp = plan.of(body);
  EXPECT_EQ(bp.eqns[4].action, EqnAction::in_place);
  EXPECT_TRUE(copies_of(bp, CopyKind::whole).empty());
  // The popped value is read out at its own size before the shift overwrites it.
  ASSERT_EQ(bp.eqns[0].copies.size(), 1u);
  EXPECT_EQ(bp.eqns[0].copies[0].kind, CopyKind::read);
  EXPECT_EQ(bp.eqns[0].copies[0].bytes, 4);
  EXPECT_NE(buffer_of(bp, body, "v"), buffer_of(bp, body, "c"));
  int64_t read_bytes = 0;
  for (const Copy* c : copies_of(bp, CopyKind::read)) read_bytes += c->bytes;
  EXPECT_EQ(read_bytes, 4 + 16 + 4);  // the scalar, the shifted row, the y into its row
}

TEST(BufferAssignment, SlowPopCostsWhatFastPopCosts) {
  BufferOptions o;
  o.donated = {true};
  Jaxpr slow = parse(pop_program(kSlowPopBody));
  Jaxpr fast = parse(pop_program(kFastPopBody));
  CopyStats s = assign_buffers(slow, o).stats();
  CopyStats f = assign_buffers(fast, o).stats();
  EXPECT_EQ(s.whole_in_loop, 0);
  EXPECT_EQ(f.whole_in_loop, 0);
  EXPECT_EQ(s.whole_outside + f.whole_outside, 0);
  EXPECT_LE(s.read_bytes, f.read_bytes);
  EXPECT_EQ(f.read_bytes, 4 + 16 + 4 + 4);
}

// The seed's slow_insert backward rule (custom_vjp bwd), run as a scan over the cotangent
// carry: read ct[row, col], shift the row left, zero the element after the slice.
TEST(BufferAssignment, SlowInsertBackwardRuleUpdatesTheCotangentCarryInPlace) {
  const std::string body = R"({ lambda ; g:f32[4,9] row:i32[] col:i32[]. let
      cv1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] g row col
      cv:f32[] = squeeze[dimensions=(0, 1)] cv1
      col1:i32[] = add col 1:i32[]
      u:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] g row col1
      g1:f32[4,9] = dynamic_update_slice g u row col
      col4:i32[] = add col 4:i32[]
      z:f32[1,1] = broadcast_in_dim 0.0:f32[]
      g2:f32[4,9] = dynamic_update_slice g1 z row col4
    in (g2, cv) })";
  Jaxpr j = parse(pop_program(body));
  BufferOptions o;
  o.donated = {true};
  o.fail_on_copy = true;
  BufferAssignment plan = assign_buffers(j, o);
  const Jaxpr& b = scan_body(j, 0);
  const JaxprBuffers& bp = plan.of(b);
  EXPECT_EQ(buffer_of(bp, b, "g2"), buffer_of(bp, b, "g"));
  EXPECT_EQ(bp.eqns[4].action, EqnAction::in_place);
  EXPECT_EQ(bp.eqns[7].action, EqnAction::in_place);
  EXPECT_EQ(plan.stats().whole_in_loop, 0);
}

TEST(BufferAssignment, ElementwiseCarryUpdateStaysInTheCarryBuffer) {
  const std::string body = R"({ lambda ; c:f32[8] x:f32[]. let
      d:f32[8] = mul c x
    in (d,) })";
  Jaxpr j = parse("{ lambda ; s:f32[8] xs:f32[5]. let\n" +
                  scan_of(body, "r:f32[8]", "s xs", 5, 0, 1, 2) + "\n in (r,) }");
  BufferOptions o;
  o.fail_on_copy = true;
  BufferAssignment plan = assign_buffers(j, o);
  EXPECT_EQ(plan.stats().whole_in_loop, 0);
  const Jaxpr& b = scan_body(j, 0);
  EXPECT_EQ(buffer_of(plan.of(b), b, "d"), buffer_of(plan.of(b), b, "c"));
}

TEST(BufferAssignment, FreshCarryOutIsComputedInTheCarryBufferWhenTheOldOneIsDead) {
  const std::string body = R"({ lambda ; c:f32[8] x:f32[]. let
      s:f32[] = reduce_sum[axes=(0,)] c
      t:f32[] = add s x
      d:f32[8] = broadcast_in_dim t
    in (d, s) })";
  Jaxpr j = parse("{ lambda ; s0:f32[8] xs:f32[5]. let\n" +
                  scan_of(body, "r:f32[8] ys:f32[5]", "s0 xs", 5, 0, 1, 2) + "\n in (r, ys) }");
  BufferAssignment plan = assign_buffers(j);
  const Jaxpr& b = scan_body(j, 0);
  const JaxprBuffers& bp = plan.of(b);
  EXPECT_EQ(buffer_of(bp, b, "d"), buffer_of(bp, b, "c"));
  EXPECT_TRUE(copies_of(bp, CopyKind::whole).empty());
}

const std::string kFreshCarryBody = R"({ lambda ; c:f32[8] x:f32[]. let
      d:f32[8] = sin c
      s:f32[] = reduce_sum[axes=(0,)] c
    in (d, s) })";

std::string fresh_carry_program() {
  return "{ lambda ; s0:f32[8] xs:f32[5]. let\n" +
         scan_of(kFreshCarryBody, "r:f32[8] ys:f32[5]", "s0 xs", 5, 0, 1, 2) + "\n in (r, ys) }";
}

TEST(BufferAssignment, FreshCarryOutWhileOldCarryIsLiveIsCopiedAtTheEndOfTheIteration) {
  Jaxpr j = parse(fresh_carry_program());
  BufferAssignment plan = assign_buffers(j);
  const Jaxpr& b = scan_body(j, 0);
  const JaxprBuffers& bp = plan.of(b);
  auto whole = copies_of(bp, CopyKind::whole);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_TRUE(whole[0]->in_loop);
  EXPECT_EQ(whole[0]->bytes, 32);
  EXPECT_EQ(whole[0]->eqn, -1);
  EXPECT_EQ(whole[0]->dst, buffer_of(bp, b, "c"));
  EXPECT_EQ(whole[0]->src, buffer_of(bp, b, "d"));
}

TEST(BufferAssignment, FailOnCopyNamesTheEqnAndTheValue) {
  Jaxpr j = parse(fresh_carry_program());
  BufferOptions o;
  o.fail_on_copy = true;
  try {
    assign_buffers(j, o);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("whole-buffer copy of 32 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("carry-out 0"), std::string::npos) << m;
    EXPECT_NE(m.find("eqn 0 (`sin`)"), std::string::npos) << m;
    EXPECT_NE(m.find("body of eqn 0 (scan)"), std::string::npos) << m;
    // Names as print_jaxpr gives them: s0=a xs=b r=c ys=d, then the body's c=e x=f d=g.
    EXPECT_NE(m.find("`g`"), std::string::npos) << m;
  }
}

TEST(BufferAssignment, FailOnCopyNamesAnUpdateOfALiveCarry) {
  const std::string body = R"({ lambda ; c:f32[8] x:f32[2]. let
      d:f32[8] = dynamic_update_slice c x 0:i32[]
    in (d, c) })";
  Jaxpr j = parse("{ lambda ; s0:f32[8] xs:f32[5,2]. let\n" +
                  scan_of(body, "r:f32[8] ys:f32[5,8]", "s0 xs", 5, 0, 1, 2) + "\n in (r, ys) }");
  BufferOptions o;
  o.fail_on_copy = true;
  try {
    assign_buffers(j, o);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("eqn 0 (`dynamic_update_slice`) `g:f32[8] = dynamic_update_slice e f"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("an output"), std::string::npos) << m;  // c is returned as a y
  }
}

TEST(BufferAssignment, PermutedCarriesAreStagedThroughATemp) {
  const std::string body = R"({ lambda ; p:f32[4] q:f32[4]. let  in (q, p) })";
  Jaxpr j = parse("{ lambda ; a:f32[4] b:f32[4]. let\n" +
                  scan_of(body, "c:f32[4] d:f32[4]", "a b", 3, 0, 2, 2) + "\n in (c, d) }");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& bp = plan.of(scan_body(j, 0));
  ASSERT_EQ(bp.end_copies.size(), 4u);  // two stagings, then two carry writes
  EXPECT_EQ(bp.buffers[bp.end_copies[0].dst].origin, BufferOrigin::temp);
  EXPECT_EQ(bp.buffers[bp.end_copies[1].dst].origin, BufferOrigin::temp);
  EXPECT_EQ(bp.buffers[bp.end_copies[2].dst].origin, BufferOrigin::carry);
  EXPECT_EQ(bp.end_copies[2].src, bp.end_copies[0].dst);
}

TEST(BufferAssignment, RefAccumulatorInAScanIsUpdatedInPlace) {
  const std::string body = R"({ lambda ; g:Ref{f32[4,9]} row:i32[] v:f32[9]. let
      g[row] += v
    in () })";
  Jaxpr j = parse("{ lambda ; acc:Ref{f32[4,9]} rows:i32[6] vs:f32[6,9]. let\n" +
                  scan_of(body, "", "acc rows vs", 6, 1, 0, 3).substr(3) + "\n in () }");
  BufferOptions o;
  o.fail_on_copy = true;
  BufferAssignment plan = assign_buffers(j, o);
  const Jaxpr& b = scan_body(j, 0);
  const JaxprBuffers& bp = plan.of(b);
  EXPECT_EQ(bp.eqns[0].action, EqnAction::in_place);
  int g = buffer_of(bp, b, "g");
  EXPECT_EQ(bp.buffers[g].origin, BufferOrigin::scan_const);
  EXPECT_EQ(bp.buffers[g].outer, buffer_of(plan.top(), j, "acc"));
  EXPECT_TRUE(plan.all_copies().empty());
}

// ---------------------------------------------------------------- jit and cond

TEST(BufferAssignment, JitBodyUpdatesAHandedOverOperandInPlace) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2]. let
    c:f32[8] = sin a
    d:f32[8] = jit[
      name=upd
      jaxpr={ lambda ; x:f32[8] u:f32[2]. let
          y:f32[8] = dynamic_update_slice x u 3:i32[]
        in (y,) }
    ] c b
  in (d,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& top = plan.top();
  EXPECT_EQ(top.eqns[1].in_place[0], 0);
  EXPECT_EQ(buffer_of(top, j, "d"), buffer_of(top, j, "c"));
  EXPECT_TRUE(plan.all_copies().empty());
}

TEST(BufferAssignment, CondBranchesComputeIntoTheResultBuffer) {
  Jaxpr j = parse(R"({ lambda ; p:i32[] a:f32[8]. let
    r:f32[8] = cond[
      branches=(
        { lambda ; x:f32[8]. let
            y:f32[8] = sin x
          in (y,) }
        { lambda ; x:f32[8]. let  in (x,) }
      )
    ] p a
  in (r,) })");
  BufferAssignment plan = assign_buffers(j);
  const JaxprBuffers& top = plan.top();
  int r = buffer_of(top, j, "r");
  ASSERT_EQ(top.eqns[0].sub_plans.size(), 2u);
  const JaxprBuffers& b0 = plan.jaxprs.at(top.eqns[0].sub_plans[0]);
  const JaxprBuffers& b1 = plan.jaxprs.at(top.eqns[0].sub_plans[1]);
  // Branch 0 computes `sin` straight into the result; branch 1 copies its operand there.
  int y = b0.buffer_of_var.at(as_var(b0.jaxpr->outvars[0]).id);
  EXPECT_EQ(b0.buffers[y].home, 0);
  EXPECT_EQ(b0.buffers[y].outer, r);
  EXPECT_TRUE(b0.end_copies.empty());
  ASSERT_EQ(b1.end_copies.size(), 1u);
  EXPECT_EQ(b1.buffers[b1.end_copies[0].dst].outer, r);
  EXPECT_EQ(b1.end_copies[0].kind, CopyKind::whole);
  EXPECT_FALSE(b1.end_copies[0].in_loop);
}

// ---------------------------------------------------------------- the printed plan

TEST(BufferAssignment, PrintedPlanListsBuffersUpdatesAndCopies) {
  Jaxpr j = parse(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
    c:f32[8] = sin a
    d:f32[8] = dynamic_update_slice c b i
    e:f32[8] = add c d
    f:f32[2] = dynamic_slice[slice_sizes=(2,)] e i
  in (e, f) })");
  BufferAssignment plan = assign_buffers(j);
  EXPECT_EQ(
      print_buffer_plan(j, plan),
      "plan 0: top level (outside loops)\n"
      "  buffer b0 f32[8] 32 bytes: input 0, read-only\n"
      "  buffer b1 f32[2] 8 bytes: input 1, read-only\n"
      "  buffer b2 i32[] 4 bytes: input 2, read-only\n"
      "  buffer b3 f32[8] 32 bytes: eqn 0 (sin), is output 0\n"
      "  buffer b4 f32[8] 32 bytes: eqn 1 (dynamic_update_slice)\n"
      "  buffer b5 f32[2] 8 bytes: eqn 3 (dynamic_slice), is output 1\n"
      "  value a:f32[8] b0\n"
      "  value b:f32[2] b1\n"
      "  value c:i32[] b2\n"
      "  value d:f32[8] b3\n"
      "  value e:f32[8] b4\n"
      "  value f:f32[8] b3\n"
      "  value g:f32[2] b5\n"
      "  eqn 0 sin: fresh\n"
      "  eqn 1 dynamic_update_slice: fresh\n"
      "    copy whole b3 -> b4, 32 bytes, outside loops, of `d`: operand `d` cannot be "
      "overwritten: `d` shares its buffer and is still used by eqn 2 (`add`)\n"
      "  eqn 2 add: in place on operand 0 (b3)\n"
      "  eqn 3 dynamic_slice: fresh\n"
      "    copy read b3 -> b5, 8 bytes, outside loops, of `f`: read into a buffer of its own\n"
      "copies: 0 whole in loops (0 bytes per iteration), 1 whole outside loops (32 bytes), "
      "1 reads (8 bytes), 0 fills\n");
}

TEST(BufferAssignment, PrintedNamesMatchPrintJaxprThroughNestedJaxprs) {
  Jaxpr j = parse(slice1_program());
  BufferAssignment plan = assign_buffers(j);
  std::string text = print_buffer_plan(j, plan);
  std::string printed = print_jaxpr(j);
  // print_jaxpr names the body's carry `f` and the DUS result `m`.
  EXPECT_NE(printed.find("m:f32[4,9] = dynamic_update_slice f l g h"), std::string::npos)
      << printed;
  EXPECT_NE(text.find("  value f:f32[4,9] b0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  value m:f32[4,9] b0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  buffer b0 f32[4,9] 144 bytes: carry 0 = outer b4\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace refjit
