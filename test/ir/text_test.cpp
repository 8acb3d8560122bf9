// The jaxpr text format: printing, parsing, round trips and error reporting (docs/ir.md).
#include "refjit/ir/text.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"

namespace refjit {
namespace {

namespace fs = std::filesystem;

// $REFJIT_TEST_DATA/data (set by ctest), else test/data next to this file.
fs::path data_dir() {
  if (const char* env = std::getenv("REFJIT_TEST_DATA")) return fs::path(env) / "data";
  return fs::path(__FILE__).parent_path().parent_path() / "data";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string strip_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

ArrayType f32(Shape s = {}) { return ArrayType{DType::f32, std::move(s)}; }
ArrayType i32(Shape s = {}) { return ArrayType{DType::i32, std::move(s)}; }
Literal lit_i32(int64_t v) { return Literal::of_int(DType::i32, v); }
Literal lit_f32(double v) { return Literal::of_float(DType::f32, v); }

IndexerDim static_slice(int64_t start, int64_t size, int64_t stride = 1) {
  return IndexerDim{IndexerDim::Kind::slice, start, size, stride, false};
}
IndexerDim dynamic_slice_dim(int64_t size) {
  return IndexerDim{IndexerDim::Kind::slice, 0, size, 1, true};
}
IndexerDim static_index(int64_t i) { return IndexerDim{IndexerDim::Kind::index, i, 0, 1, false}; }
IndexerDim dynamic_index() { return IndexerDim{IndexerDim::Kind::index, 0, 0, 1, true}; }
IndexerDim index_array() { return IndexerDim{IndexerDim::Kind::index_array, 0, 0, 1, true}; }

Params with_indexer(std::vector<IndexerDim> dims) { return Params{{"indexer", Indexer{dims}}}; }

void drop(JaxprBuilder& b, Var v) { b.jaxpr().vars[v.id].dropped = true; }

// ---------------------------------------------------------------------------------------------
// Printing hand-built jaxprs.

TEST(PrintJaxpr, Pure2ProgramFromTheSeed) {
  JaxprBuilder b;
  Var x = b.add_invar(f32());
  Var ref = b.add_eqn1(Prim::new_ref, {x});
  Var r1 = b.add_eqn1(Prim::get, {ref}, with_indexer({}));
  Var r2 = b.add_eqn1(Prim::get, {ref}, with_indexer({}));
  Var sum = b.add_eqn1(Prim::add, {r1, r2});
  drop(b, b.add_eqn1(Prim::swap, {ref, sum}, with_indexer({})));
  Var out = b.add_eqn1(Prim::get, {ref}, with_indexer({}));
  b.set_outvars({out});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda ; a:f32[]. let\n"
            "    b:Ref{f32[]} = new_ref a\n"
            "    c:f32[] <- b[...]\n"
            "    d:f32[] <- b[...]\n"
            "    e:f32[] = add c d\n"
            "    b[...] <- e\n"
            "    f:f32[] <- b[...]\n"
            "  in (f,) }");
}

TEST(PrintJaxpr, TakeWithGradientRef) {
  JaxprBuilder b;
  Var x = b.add_constvar(f32({10}));
  Var g = b.add_constvar(Type::ref(f32({10})));
  Var i = b.add_invar(i32());
  Var ct = b.add_invar(f32());
  Var neg = b.add_eqn1(Prim::lt, {i, lit_i32(0)});
  Var wrapped = b.add_eqn1(Prim::add, {i, lit_i32(10)});
  Var idx = b.add_eqn1(Prim::select_n, {neg, i, wrapped});
  Var sl = b.add_eqn1(Prim::dynamic_slice, {x, idx}, Params{{"slice_sizes", IntList{1}}});
  Var y = b.add_eqn1(Prim::squeeze, {sl}, Params{{"dimensions", IntList{0}}});
  Var bc = b.add_eqn1(
      Prim::broadcast_in_dim, {ct},
      Params{
          {"broadcast_dimensions", IntList{}}, {"shape", IntList{1}}, {"sharding", NoneParam{}}});
  b.add_eqn(Prim::addupdate, {g, bc, idx}, with_indexer({dynamic_slice_dim(1)}));
  b.set_outvars({y});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda a:f32[10] b:Ref{f32[10]}; c:i32[] d:f32[]. let\n"
            "    e:bool[] = lt c 0:i32[]\n"
            "    f:i32[] = add c 10:i32[]\n"
            "    g:i32[] = select_n e c f\n"
            "    h:f32[1] = dynamic_slice[slice_sizes=(1,)] a g\n"
            "    i:f32[] = squeeze[dimensions=(0,)] h\n"
            "    j:f32[1] = broadcast_in_dim d\n"
            "    b[g:g+1] += j\n"
            "  in (i,) }");
}

// The foreach recipe: a scan whose body closes over a ref and accumulates into it.
TEST(PrintJaxpr, ScanWithRefConstAndNestedIndentation) {
  JaxprBuilder body;
  Var r = body.add_invar(Type::ref(i32()));
  Var x = body.add_invar(i32());
  body.add_eqn(Prim::addupdate, {r, x}, with_indexer({}));
  body.set_outvars({body.add_eqn1(Prim::mul, {x, lit_i32(2)})});

  JaxprBuilder b;
  Var ref = b.add_constvar(Type::ref(i32()));
  Var xs = b.add_invar(i32({10}));
  Var ys = b.add_eqn1(Prim::scan, {ref, xs},
                      Params{{"jaxpr", std::make_shared<const Jaxpr>(body.finish())},
                             {"length", int64_t{10}},
                             {"reverse", false},
                             {"num_consts", int64_t{1}},
                             {"num_carry", int64_t{0}},
                             {"linear", IntList{0, 0}},
                             {"unroll", int64_t{1}},
                             {"_split_transpose", false}});
  b.set_outvars({ys});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            strip_trailing_newlines(read_text(data_dir() / "foreach_scan.jaxpr")));
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda a:Ref{i32[]}; b:i32[10]. let\n"
            "    c:i32[10] = scan[\n"
            "      _split_transpose=False\n"
            "      jaxpr={ lambda ; d:Ref{i32[]} e:i32[]. let\n"
            "          d[...] += e\n"
            "          f:i32[] = mul e 2:i32[]\n"
            "        in (f,) }\n"
            "      length=10\n"
            "      linear=(False, False)\n"
            "      num_carry=0\n"
            "      num_consts=1\n"
            "      reverse=False\n"
            "      unroll=1\n"
            "    ] a b\n"
            "  in (c,) }");
}

TEST(PrintJaxpr, CondBranchesOnTheirOwnLines) {
  JaxprBuilder br0;
  Var d = br0.add_invar(f32({3}));
  br0.set_outvars({br0.add_eqn1(Prim::sin, {d})});
  JaxprBuilder br1;
  br1.set_outvars({br1.add_invar(f32({3}))});

  JaxprBuilder b;
  Var p = b.add_invar(i32());
  Var x = b.add_invar(f32({3}));
  JaxprList branches{std::make_shared<const Jaxpr>(br0.finish()),
                     std::make_shared<const Jaxpr>(br1.finish())};
  b.set_outvars({b.add_eqn1(Prim::cond, {p, x}, Params{{"branches", branches}})});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda ; a:i32[] b:f32[3]. let\n"
            "    c:f32[3] = cond[\n"
            "      branches=(\n"
            "        { lambda ; d:f32[3]. let\n"
            "            e:f32[3] = sin d\n"
            "          in (e,) }\n"
            "        { lambda ; f:f32[3]. let  in (f,) }\n"
            "      )\n"
            "    ] a b\n"
            "  in (c,) }");
}

TEST(PrintJaxpr, JitPrintsNameFirstAndZeroOutputEqnsPrintOnlyTheRhs) {
  JaxprBuilder body;
  Var r = body.add_invar(Type::ref(f32({2})));
  Var v = body.add_invar(f32());
  body.add_eqn(Prim::addupdate, {r, v, lit_i32(1)}, with_indexer({dynamic_index()}));
  JaxprBuilder b;
  Var ref = b.add_invar(Type::ref(f32({2})));
  auto outs = b.add_eqn(Prim::jit, {ref, lit_f32(1.0)},
                        Params{{"name", std::string("bump")},
                               {"jaxpr", std::make_shared<const Jaxpr>(body.finish())},
                               {"inline", false}});
  EXPECT_TRUE(outs.empty());
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda ; a:Ref{f32[2]}. let\n"
            "    jit[\n"
            "      name=bump\n"
            "      jaxpr={ lambda ; b:Ref{f32[2]} c:f32[]. let\n"
            "          b[1:i32[]] += c\n"
            "        in () }\n"
            "    ] a 1.0:f32[]\n"
            "  in () }");
}

TEST(PrintJaxpr, IndexerForms) {
  JaxprBuilder b;
  Var r = b.add_invar(Type::ref(f32({4, 10})));
  Var i = b.add_invar(i32());
  Var arr = b.add_invar(i32({5}));
  std::vector<Atom> outs;
  auto get = [&](std::vector<IndexerDim> dims, std::vector<Atom> dyn = {}) {
    std::vector<Atom> ins{r};
    ins.insert(ins.end(), dyn.begin(), dyn.end());
    outs.push_back(b.add_eqn1(Prim::get, ins, with_indexer(std::move(dims))));
  };
  get({static_slice(1, 2), static_slice(0, 10)});    // 1:3,:
  get({static_slice(0, 4), static_slice(2, 8)});     // :,2:
  get({static_slice(0, 2)});                         // :2
  get({static_index(1), static_slice(0, 5, 2)});     // 1,::2
  get({static_slice(0, 4), static_slice(1, 3, 2)});  // :,1:7:2
  get({dynamic_index(), dynamic_slice_dim(3)}, {i, i});
  get({index_array()}, {arr});
  get({dynamic_index()}, {lit_i32(2)});
  b.set_outvars(outs);
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda ; a:Ref{f32[4,10]} b:i32[] c:i32[5]. let\n"
            "    d:f32[2,10] <- a[1:3,:]\n"
            "    e:f32[4,8] <- a[:,2:]\n"
            "    f:f32[2,10] <- a[:2]\n"
            "    g:f32[5] <- a[1,::2]\n"
            "    h:f32[4,3] <- a[:,1:7:2]\n"
            "    i:f32[3] <- a[b,b:b+3]\n"
            "    j:f32[5,10] <- a[c]\n"
            "    k:f32[10] <- a[2:i32[]]\n"
            "  in (d, e, f, g, h, i, j, k) }");
}

TEST(PrintJaxpr, SwapWithKeptResultRepeatsThePlace) {
  JaxprBuilder b;
  Var r = b.add_invar(Type::ref(f32({3})));
  Var v = b.add_invar(f32());
  Var old = b.add_eqn1(Prim::swap, {r, v}, with_indexer({static_index(2)}));
  b.set_outvars({old});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda ; a:Ref{f32[3]} b:f32[]. let\n"
            "    c:f32[], a[2] <- a[2], b\n"
            "  in (c,) }");
}

TEST(PrintJaxpr, ParamValuesPrintAsJaxPrintsThem) {
  JaxprBuilder b;
  Var x = b.add_invar(f32({2, 3}));
  Var y = b.add_invar(f32({3, 4}));
  Var pad = b.add_eqn1(Prim::pad, {x, lit_f32(0.0)},
                       Params{{"padding_config", IntListList{{0, 0, 0}, {1, 2, 0}}}});
  DotDims dd{{1}, {0}, {}, {}};
  Var dot = b.add_eqn1(Prim::dot_general, {x, y},
                       Params{{"dimension_numbers", dd},
                              {"precision", NoneParam{}},
                              {"preferred_element_type", DType::f32}});
  Var cvt = b.add_eqn1(Prim::convert_element_type, {x},
                       Params{{"new_dtype", DType::i32}, {"weak_type", false}});
  Var bc = b.add_eqn1(Prim::broadcast_in_dim, {y},
                      Params{{"broadcast_dimensions", IntList{1, 2}}, {"shape", IntList{2, 3, 4}}});
  b.set_outvars({pad, dot, cvt, bc});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda ; a:f32[2,3] b:f32[3,4]. let\n"
            "    c:f32[2,6] = pad[padding_config=((0, 0, 0), (1, 2, 0))] a 0.0:f32[]\n"
            "    d:f32[2,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) "
            "precision=None preferred_element_type=float32] a b\n"
            "    e:i32[2,3] = convert_element_type[new_dtype=int32 weak_type=False] a\n"
            "    f:f32[2,3,4] = broadcast_in_dim[broadcast_dimensions=(1, 2)] b\n"
            "  in (c, d, e, f) }");
}

TEST(PrintJaxpr, NamesContinuePastZWithJaxsScheme) {
  JaxprBuilder b;
  Var v = b.add_invar(f32());
  for (int k = 0; k < 27; ++k) v = b.add_eqn1(Prim::neg, {v});
  b.set_outvars({v});
  std::string s = print_jaxpr(b.jaxpr());
  EXPECT_NE(s.find("    z:f32[] = neg y\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    ba:f32[] = neg z\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    bb:f32[] = neg ba\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  in (bb,) }"), std::string::npos) << s;
}

TEST(PrintJaxpr, EmptyJaxprAndConstOnlyJaxpr) {
  JaxprBuilder b;
  EXPECT_EQ(print_jaxpr(b.jaxpr()), "{ lambda ; . let  in () }");
  Var c = b.add_constvar(f32({10}));
  b.add_constvar(Type::ref(f32({10})));
  b.set_outvars({c, lit_f32(2.5)});
  EXPECT_EQ(print_jaxpr(b.jaxpr()),
            "{ lambda a:f32[10] b:Ref{f32[10]}; . let  in (a, 2.5:f32[]) }");
}

// ---------------------------------------------------------------------------------------------
// Round trips.

std::vector<fs::path> data_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(data_dir()))
    if (e.path().extension() == ".jaxpr") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Files named seed_* or jax_* are verbatim JAX printouts (JAX reuses names in nested jaxprs,
// so our renaming differs); every other file is in the printer's own format.
bool is_jax_printout(const fs::path& p) {
  std::string n = p.filename().string();
  return n.rfind("seed_", 0) == 0 || n.rfind("jax_", 0) == 0;
}

TEST(TextRoundTrip, EveryDataFilePrintsBackUnchanged) {
  std::vector<fs::path> files = data_files();
  ASSERT_GE(files.size(), 8u) << "test data not found in " << data_dir();
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    std::string source = read_text(p);
    Jaxpr j = parse_jaxpr(source, p.filename().string());
    std::string printed = print_jaxpr(j);
    if (!is_jax_printout(p)) EXPECT_EQ(printed, strip_trailing_newlines(source));
    Jaxpr again = parse_jaxpr(printed);
    EXPECT_EQ(print_jaxpr(again), printed);
  }
}

TEST(TextRoundTrip, BuiltJaxprSurvivesPrintParsePrint) {
  JaxprBuilder b;
  Var r = b.add_invar(Type::ref(f32({4, 10})));
  Var i = b.add_invar(i32());
  Var arr = b.add_invar(i32({2}));
  Var v = b.add_eqn1(Prim::get, {r, arr}, with_indexer({index_array()}));
  Var w = b.add_eqn1(Prim::get, {r, i}, with_indexer({dynamic_slice_dim(2)}));
  Var sum = b.add_eqn1(Prim::add, {v, w});
  b.add_eqn(Prim::addupdate, {r, sum, lit_i32(1)}, with_indexer({dynamic_slice_dim(2)}));
  b.set_outvars({sum, lit_i32(7)});
  std::string printed = print_jaxpr(b.jaxpr());
  Jaxpr j = parse_jaxpr(printed);
  EXPECT_EQ(print_jaxpr(j), printed);
  ASSERT_EQ(j.eqns.size(), 4u);
  EXPECT_EQ(j.eqns[0].params.get<Indexer>("indexer"), Indexer{{index_array()}});
  EXPECT_EQ(j.eqns[3].params.get<Indexer>("indexer"), Indexer{{dynamic_slice_dim(2)}});
  EXPECT_EQ(std::get<Literal>(j.eqns[3].ins[2]), lit_i32(1));
}

// ---------------------------------------------------------------------------------------------
// Parsing JAX's printouts.

TEST(ParseJaxpr, SeedTakeVjpPrintoutParsesAndVerifies) {
  std::string source = read_text(data_dir() / "seed_take_vjp_jaxpr.jaxpr");
  Jaxpr j = parse_jaxpr(source, "seed_take_vjp_jaxpr.jaxpr");
  EXPECT_EQ(j.const_types(), (std::vector<Type>{f32({10}), Type::ref(f32({10}))}));
  EXPECT_TRUE(j.invars.empty());
  EXPECT_TRUE(j.outvars.empty());
  ASSERT_EQ(j.eqns.size(), 2u);

  const Eqn& fwd = j.eqns[0];
  EXPECT_EQ(fwd.prim, Prim::jit);
  EXPECT_EQ(fwd.params.get<std::string>("name"), "take");
  ASSERT_EQ(fwd.outs.size(), 2u);
  EXPECT_TRUE(j.info(fwd.outs[0]).dropped);
  EXPECT_EQ(j.info(fwd.outs[1]).name, "c");
  EXPECT_EQ(std::get<Literal>(fwd.ins[1]), lit_i32(3));
  const Jaxpr& inner = *fwd.params.get<JaxprPtr>("jaxpr");
  ASSERT_EQ(inner.eqns.size(), 6u);
  EXPECT_EQ(inner.eqns[1].params.get<DType>("new_dtype"), DType::i32);
  EXPECT_FALSE(inner.eqns[1].params.get<bool>("weak_type"));
  // `in (_, c)`: the `_` is the dropped squeeze result.
  ASSERT_EQ(inner.outvars.size(), 2u);
  EXPECT_EQ(as_var(inner.outvars[0]), inner.eqns[5].outs[0]);
  EXPECT_EQ(as_var(inner.outvars[1]), inner.eqns[3].outs[0]);

  const Eqn& bwd = j.eqns[1];
  EXPECT_TRUE(bwd.outs.empty());
  EXPECT_EQ(std::get<Literal>(bwd.ins[2]), lit_f32(1.0));
  const Jaxpr& back = *bwd.params.get<JaxprPtr>("jaxpr");
  ASSERT_EQ(back.eqns.size(), 2u);
  // broadcast_in_dim's hidden params come from the binder type.
  EXPECT_EQ(back.eqns[0].params.get<IntList>("shape"), (IntList{1}));
  EXPECT_EQ(back.eqns[0].params.get<IntList>("broadcast_dimensions"), IntList{});
  EXPECT_EQ(back.eqns[1].prim, Prim::addupdate);
  EXPECT_EQ(back.eqns[1].params.get<Indexer>("indexer"), Indexer{{dynamic_slice_dim(1)}});
  EXPECT_EQ(print_jaxpr(j), strip_trailing_newlines(read_text(data_dir() / "take_vjp_ours.jaxpr")));
}

TEST(ParseJaxpr, JaxOnlyParamsAreAcceptedAndDropped) {
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:f32[] b:f32[3]. let\n"
      "    c:Ref{f32[]} = mutable_array[kind=None memory_space=None pin=False] a\n"
      "    d:Ref{f32[]} = new_ref[kind=None memory_space=None pin=False] a\n"
      "    e:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3) sharding=None] b\n"
      "    f:f32[3] = pjit[\n"
      "      name=<lambda>\n"
      "      jaxpr={ lambda ; g:f32[3]. let h:f32[3] = sin g in (h,) }\n"
      "      compiler_options_kvs=()\n"
      "      ctx_mesh=AbstractMesh((), axis_types=())\n"
      "      donated_invars=(False,)\n"
      "      in_layouts=(None,)\n"
      "      in_shardings=(UnspecifiedValue,)\n"
      "      inline=False\n"
      "      keep_unused=False\n"
      "      out_layouts=(None,)\n"
      "      out_shardings=(UnspecifiedValue,)\n"
      "    ] b\n"
      "  in (e, f) }");
  ASSERT_EQ(j.eqns.size(), 4u);
  EXPECT_EQ(j.eqns[0].prim, Prim::new_ref);
  EXPECT_TRUE(j.eqns[0].params.empty());
  EXPECT_TRUE(j.eqns[1].params.empty());
  EXPECT_FALSE(j.eqns[2].params.has("sharding"));
  EXPECT_EQ(j.eqns[3].prim, Prim::jit);
  EXPECT_EQ(j.eqns[3].params.entries().size(), 2u);
  EXPECT_EQ(j.eqns[3].params.get<std::string>("name"), "<lambda>");
  EXPECT_EQ(print_jaxpr(j),
            "{ lambda ; a:f32[] b:f32[3]. let\n"
            "    c:Ref{f32[]} = new_ref a\n"
            "    d:Ref{f32[]} = new_ref a\n"
            "    e:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,)] b\n"
            "    f:f32[3] = jit[\n"
            "      name=<lambda>\n"
            "      jaxpr={ lambda ; g:f32[3]. let\n"
            "          h:f32[3] = sin g\n"
            "        in (h,) }\n"
            "    ] b\n"
            "  in (e, f) }");
}

TEST(ParseJaxpr, FlatFormWithSemicolonsAndBareLiterals) {
  Jaxpr j = parse_jaxpr(
      "{ lambda ; b:i32[] c:f32[] k:f32[]. let l:f32[] = mul k c; m:f32[1] = "
      "broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] l; n:f32[10] = "
      "broadcast_in_dim[broadcast_dimensions=() shape=(10,) sharding=None] 0.0:f32[]; "
      "o:f32[10] = dynamic_update_slice n m b; p:f32[] = mul l 2.0; q:bool[] = lt b 0 "
      "in (o, p, q) }");
  ASSERT_EQ(j.eqns.size(), 6u);
  EXPECT_EQ(std::get<Literal>(j.eqns[4].ins[1]), lit_f32(2.0));
  EXPECT_EQ(std::get<Literal>(j.eqns[5].ins[1]), lit_i32(0));
  EXPECT_EQ(j.out_types(), (std::vector<Type>{f32({10}), f32(), ArrayType{DType::bool_, {}}}));
}

TEST(ParseJaxpr, CommentsAreSkipped) {
  Jaxpr j = parse_jaxpr(
      "# RUN: refjit run %s\n"
      "// a C++-style comment too\n"
      "{ lambda ; a:f32[]. let  # trailing comment\n"
      "    b:f32[] = neg a\n"
      "  in (b,) }\n");
  EXPECT_EQ(j.eqns.size(), 1u);
}

TEST(ParseJaxpr, SourceNamesAreKept) {
  Jaxpr j = parse_jaxpr("{ lambda ; x:f32[] y:f32[]. let z:f32[] = add x y in (z,) }");
  EXPECT_EQ(j.info(j.invars[0]).name, "x");
  EXPECT_EQ(j.info(j.invars[1]).name, "y");
  EXPECT_EQ(j.info(j.eqns[0].outs[0]).name, "z");
}

TEST(ParseJaxpr, NestedJaxprsHaveTheirOwnScope) {
  // The inner jaxpr reuses `a` and `b`; outer `b` is not visible inside.
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:f32[] b:f32[]. let\n"
      "    c:f32[] = jit[name=f jaxpr={ lambda ; a:f32[]. let b:f32[] = neg a in (b,) }] a\n"
      "  in (c,) }");
  EXPECT_EQ(j.eqns.size(), 1u);
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[] b:f32[]. let\n"
                           "    c:f32[] = jit[name=f jaxpr={ lambda ; a:f32[]. let d:f32[] = add "
                           "a b in (d,) }] a\n"
                           "  in (c,) }"),
               ParseError);
}

TEST(ParseJaxpr, JaxprsNamedFromOutsideTheTextFillJaxprParams) {
  // The Python package stages refjit programs into a traced function and names them there.
  auto inner = std::make_shared<const Jaxpr>(
      parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = neg a; c:f32[] = sin a in (b, c) }"));
  const std::string text =
      "{ lambda ; a:f32[]. let\n"
      "    _:f32[] b:f32[] = jit[name=staged jaxpr=staged] a\n"
      "  in (b,) }";
  Jaxpr j = parse_jaxpr(text, "<input>", NamedJaxprs{{"staged", inner}});
  ASSERT_EQ(j.eqns.size(), 1u);
  EXPECT_EQ(j.eqns[0].params.get<JaxprPtr>("jaxpr").get(), inner.get());
  // Unknown without the table; a `let` of the text itself wins over the table.
  EXPECT_THROW(parse_jaxpr(text), ParseError);
  Jaxpr own =
      parse_jaxpr("let staged = { lambda ; a:f32[]. let b:f32[] = cos a in (a, b) } in\n" + text,
                  "<input>", NamedJaxprs{{"staged", inner}});
  EXPECT_EQ(own.eqns[0].params.get<JaxprPtr>("jaxpr")->eqns[0].prim, Prim::cos);
}

TEST(ParseJaxpr, VariableNamedInfIsNotALiteral) {
  // JAX's names reach `inf` after 5751 variables; a binder on a new line is a binder.
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:f32[]. let\n"
      "    b:f32[] = add a inf:f32[]\n"
      "    inf:f32[] = neg b\n"
      "    c:f32[] = mul inf inf\n"
      "  in (c,) }");
  ASSERT_EQ(j.eqns.size(), 3u);
  EXPECT_TRUE(std::isinf(std::get<Literal>(j.eqns[0].ins[1]).f));
  EXPECT_EQ(as_var(j.eqns[2].ins[0]), j.eqns[1].outs[0]);
}

TEST(ParseJaxpr, LiteralDynamicIndexStaysDynamicAndEmptyBracketsMeanWhole) {
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:Ref{f32[4,10]}. let\n"
      "    b:f32[1,10] <- a[3:i32[]:3:i32[]+1]\n"
      "    c:f32[10] <- a[3]\n"
      "    d:f32[4,10] <- a[]\n"
      "  in (b, c, d) }");
  ASSERT_EQ(j.eqns.size(), 3u);
  EXPECT_EQ(j.eqns[0].params.get<Indexer>("indexer"), Indexer{{dynamic_slice_dim(1)}});
  EXPECT_EQ(std::get<Literal>(j.eqns[0].ins[1]), lit_i32(3));
  EXPECT_EQ(j.eqns[1].params.get<Indexer>("indexer"), Indexer{{static_index(3)}});
  EXPECT_EQ(j.eqns[1].ins.size(), 1u);
  EXPECT_TRUE(j.eqns[2].params.get<Indexer>("indexer").is_whole());
  EXPECT_EQ(print_jaxpr(j),
            "{ lambda ; a:Ref{f32[4,10]}. let\n"
            "    b:f32[1,10] <- a[3:i32[]:3:i32[]+1]\n"
            "    c:f32[10] <- a[3]\n"
            "    d:f32[4,10] <- a[...]\n"
            "  in (b, c, d) }");
}

TEST(ParseJaxpr, OlderBroadcastInDimWithAllParamsPrintsTheShortForm) {
  Jaxpr j = parse_jaxpr(
      "{ lambda ; d:f32[]. let\n"
      "    j:f32[1] = broadcast_in_dim[broadcast_dimensions=() shape=(1,) sharding=None] d\n"
      "  in (j,) }");
  EXPECT_EQ(j.eqns[0].params.get<IntList>("shape"), IntList{1});
  EXPECT_FALSE(j.eqns[0].params.has("sharding"));
  EXPECT_EQ(print_jaxpr(j),
            "{ lambda ; a:f32[]. let\n"
            "    b:f32[1] = broadcast_in_dim a\n"
            "  in (b,) }");
}

// ---------------------------------------------------------------------------------------------
// Errors.

std::string parse_error(const std::string& text) {
  try {
    parse_jaxpr(text, "t.jaxpr");
  } catch (const ParseError& e) {
    return e.what();
  }
  return "no ParseError";
}

TEST(ParseErrors, NameTheTokenAndPosition) {
  EXPECT_EQ(parse_error("{ lambda ; a:f32[]. let\n    b:f32[] = frob a\n  in (b,) }"),
            fmt::format("t.jaxpr:2:15: error: unknown primitive 'frob': refjit does not read it "
                        "(refjit.primitives() in Python and docs/primitives.md list the {} it "
                        "reads)",
                        readable_primitives().size()));
  // A near name is suggested; short names get no guess.
  EXPECT_NE(parse_error("{ lambda ; a:f32[]. let\n    b:f32[] = sine a\n  in (b,) }")
                .find("unknown primitive 'sine': refjit does not read it; did you mean 'sin'?"),
            std::string::npos);
  EXPECT_EQ(
      parse_error("{ lambda ; a:f32[]. let\n    b:f32[] = ab a\n  in (b,) }").find("did you mean"),
      std::string::npos);
  EXPECT_EQ(parse_error("{ lambda ; a:f32[]. let\n    b:f32[] = neg q\n  in (b,) }"),
            "t.jaxpr:2:19: error: undefined variable 'q'; variables must be bound before they "
            "are used (a sub-jaxpr sees only its own binders)");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg[axes=(0,)] a\n  in (b,) }"),
            "t.jaxpr:2:20: error: primitive 'neg' takes no params, found 'axes'");
  EXPECT_EQ(
      parse_error("{ lambda ; a:f32[3]. let\n    b:f32[] = reduce_sum[axis=0] a\n  in (b,) }"),
      "t.jaxpr:2:26: error: primitive 'reduce_sum' has no param 'axis' (its params: axes)");
  EXPECT_EQ(
      parse_error("{ lambda ; a:f32[3]. let\n    b:f32[] = reduce_sum[axes=0] a\n  in (b,) }"),
      "t.jaxpr:2:31: error: param 'axes' expects a tuple of integers such as (0, 1) or "
      "(1,) or ()");
  EXPECT_EQ(parse_error("{ lambda ; a:q64[3]. let  in (a,) }"),
            "t.jaxpr:1:14: error: unknown dtype 'q64' (refjit has f32, f64, i32, i64, bool, i8, "
            "i16, u8, u16, u32, u64, f16, bf16, c64, c128)");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[3] = neg a\n"),
            "t.jaxpr:3:1: error: expected an equation or 'in (...)', found end of input");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3] a:f32[3]. let  in (a,) }"),
            "t.jaxpr:1:21: error: variable 'a' is bound a second time (first bound at 1:12); "
            "every variable is bound once in its jaxpr");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let  in (a,) } extra"),
            "t.jaxpr:1:37: error: expected end of input after the jaxpr's closing '}', found "
            "'extra'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[3]. let\n    b:f32[1] <- a[0:1]\n  in (b,) }"),
            "t.jaxpr:2:17: error: 'a' has type f32[3], not a Ref; only refs are indexed with "
            "'<-' and '+='");
  EXPECT_EQ(parse_error("{ lambda ; a:Ref{f32[3]}. let\n    b:f32[] <- a[0,1]\n  in (b,) }"),
            "t.jaxpr:2:20: error: too many indices for 'a' of type Ref{f32[3]}");
  EXPECT_EQ(parse_error("{ lambda ; a:Ref{f32[3]} c:i32[] d:i32[]. let\n    b:f32[1] <- a[c:d+1]\n"
                        "  in (b,) }"),
            "t.jaxpr:2:21: error: a dynamic slice is written 'c:c+k' with the same start twice; "
            "found 'd'");
  EXPECT_EQ(parse_error("{ lambda ; a:f32[]. let\n    b:f32[] = get a\n  in (b,) }"),
            "t.jaxpr:2:15: error: a ref read is written 'b:f32[1] <- a[c:c+1]', not as 'get'");
}

TEST(ParseErrors, TypeMismatchesAreLocated) {
  try {
    parse_jaxpr("{ lambda ; a:f32[3]. let\n    b:f32[] = neg a\n  in (b,) }", "t.jaxpr");
    FAIL() << "no error";
  } catch (const TypeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "t.jaxpr:2:5: error: binder 'b' is written f32[] but neg produces f32[3]");
  }
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[3] b:i32[3]. let\n    c:f32[3] = add a b\n"
                           "  in (c,) }"),
               TypeError);
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:Ref{f32[3]}. let  in (a,) }"), RefError);
}

// Every truncation of valid texts, and many single-token mutations, give a clean error or a
// valid jaxpr; never a crash or a hang.
TEST(ParseErrors, TruncationsAndMutationsNeverCrash) {
  std::vector<std::string> sources;
  for (const fs::path& p : data_files()) sources.push_back(read_text(p));
  ASSERT_FALSE(sources.empty());
  const std::vector<std::string> splices = {"",      "[",
                                            "]",     "{",
                                            "}",     "(",
                                            ")",     ":",
                                            ",",     "=",
                                            "<-",    "+=",
                                            "...",   "_",
                                            "in",    "let",
                                            "0",     "-1",
                                            "1.5",   "x",
                                            "f32[]", "Ref{",
                                            "é",     ";",
                                            "jit[",  "99999999999999999999"};
  int parsed = 0, rejected = 0;
  auto attempt = [&](const std::string& text) {
    try {
      parse_jaxpr(text, "fuzz");
      ++parsed;
    } catch (const ParseError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("fuzz:", 0), 0u) << e.what();
      ++rejected;
    } catch (const TypeError&) {
      ++rejected;
    } catch (const RefError&) {
      ++rejected;
    }
  };
  uint64_t state = 12345;
  auto rnd = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>((state >> 33) % n);
  };
  for (const std::string& s : sources) {
    for (size_t cut = 0; cut < s.size(); cut += 7) attempt(s.substr(0, cut));
    for (int k = 0; k < 60; ++k) {
      size_t at = rnd(s.size());
      size_t len = rnd(4);
      attempt(s.substr(0, at) + splices[rnd(splices.size())] +
              s.substr(std::min(s.size(), at + len)));
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(parsed, 0);  // a few mutations (e.g. deleting a space inside a tuple) stay valid
}

TEST(ParseErrors, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "{ lambda ; a:f32[]. let b:f32[] = reshape[dimensions=";
  deep += std::string(100000, '(');
  EXPECT_THROW(parse_jaxpr(deep), ParseError);
}

}  // namespace
}  // namespace refjit

namespace refjit {
namespace {

TEST(ParseJaxpr, ComplexLiteralsReadAndPrintAsPythonWritesThem) {
  // JAX prints complex literals with Python's repr: `0j`, `2.5j`, `(1+2j)`, `(-0-1j)`.
  const std::string text =
      "{ lambda ; a:c64[3] b:c128[]. let\n"
      "    c:c64[3] = mul a (1+2j):c64[]\n"
      "    d:c64[3] = add c 0j:c64[]\n"
      "    e:c64[3] = sub d 2.5j:c64[]\n"
      "    f:c128[] = mul b (-0-1j):c128[]\n"
      "    g:c128[] = add f (1.5e-05+2j):c128[]\n"
      "    h:c64[3] = mul e (nan+infj):c64[]\n"
      "    i:f32[3] = real h\n"
      "  in (g, i) }";
  Jaxpr j = parse_jaxpr(text);
  EXPECT_EQ(print_jaxpr(j), text);
  const Literal& one_two = std::get<Literal>(j.eqns[0].ins[1]);
  EXPECT_EQ(one_two.dtype, DType::c64);
  EXPECT_EQ(one_two.f, 1.0);
  EXPECT_EQ(one_two.im, 2.0);
  const Literal& minus_i = std::get<Literal>(j.eqns[3].ins[1]);
  EXPECT_TRUE(std::signbit(minus_i.f));
  EXPECT_EQ(minus_i.im, -1.0);
  EXPECT_FALSE(minus_i.equals(0.0));
  EXPECT_TRUE(std::get<Literal>(j.eqns[1].ins[1]).equals(0.0));
  EXPECT_EQ(complex_text(DType::c64, 0.1, -3.0), "(0.1-3j)");
  EXPECT_EQ(complex_text(DType::c128, 0.0, 0.0), "0j");
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = mul a (1+2j):f32[] in (b,) }"),
               ParseError);
}

TEST(ParseJaxpr, ExplicitShardingOfDimsIsReadAndDropped) {
  // JAX prints the mesh axes a dim is split over (explicit sharding) after its size.
  Jaxpr j = parse_jaxpr(
      "{ lambda ; a:Ref{i32[4@x,4@y]} b:f32[8@(x,y),2]. let\n"
      "    c:i32[4@x,4@y] <- a[...]\n"
      "  in (c, b) }");
  EXPECT_EQ(j.type_of(j.invars[0]), Type::ref(ArrayType{DType::i32, {4, 4}}));
  EXPECT_EQ(j.type_of(j.invars[1]), Type(ArrayType{DType::f32, {8, 2}}));
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[4@]. let  in (a,) }"), ParseError);
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[4@(x,1)]. let  in (a,) }"), ParseError);
}

}  // namespace
}  // namespace refjit

TEST(ReadablePrimitives, ListRefjitsOwnAndTheJaxRewritesOnceSorted) {
  const std::vector<std::string> names = refjit::readable_primitives();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
  for (const char* name : {"add", "scan", "cholesky", "lu", "custom_linear_solve", "gather"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}
