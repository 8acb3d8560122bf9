// Internal to the jaxpr text parser (ir/parser*.cpp): the Parser class and what it reads
// into. Its member functions live in four files by what they read:
//   parser.cpp         tokens, jaxprs, `let` definitions, binders, types, atoms;
//   parser_eqns.cpp    equations: generic ones, JAX's forms and rewrites, implicit broadcasts;
//   parser_refs.cpp    ref equations (`x <- r[...]`, `r[...] <- y`, swaps) and their indexers;
//   parser_params.cpp  params and their values (tuples, records, NumPy scalars, jaxprs).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/foreign_rewrites.h"
#include "ir/lexer.h"
#include "ir/text_params.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit::text::parser {

using text::ParamKind;
using text::Tok;
using text::Token;

// Bounds nesting of sub-jaxprs and tuples, so hostile input cannot exhaust the stack.
inline constexpr int kMaxDepth = 100;
// Larger dimensions are certainly typos and would overflow element counts.
inline constexpr int64_t kMaxDim = int64_t{1} << 40;

struct Binder {
  const Token* tok;  // the name
  std::string name;  // "_" when dropped
  bool dropped = false;
  Type type;
  bool key = false;  // written key<fry>[s]: held as u32[s..., 2]
};

// The variables visible in one jaxpr; sub-jaxprs get a fresh scope.
struct Scope {
  JaxprBuilder builder;
  std::unordered_map<std::string, Var> vars;
  std::unordered_map<std::string, const Token*> bound_at;
  std::vector<Var> dropped;  // binders written `_`, in order: what `_` means in `in (_, c)`
  std::unordered_set<uint32_t> keys;  // vars written with a key<fry> type
};

// A param value as written, before it is converted to the kind its param expects.
struct Value {
  // record: a Python object's repr, `Name(field=value, ...)`; `word` is Name and each item's
  // `field` its field name.
  enum class Kind { none, boolean, integer, real, word, tuple, list, jaxpr, record };
  Kind kind = Kind::none;
  const Token* tok = nullptr;  // first token, for error positions
  bool b = false;
  int64_t i = 0;
  double d = 0.0;
  std::string word;
  std::vector<Value> items;
  std::string field;  // the field name of a record's item
  JaxprPtr jaxpr;
};

// A place a ref eqn addresses: `ref[indexer]` plus the indexer's dynamic operands.
struct Place {
  const Token* tok = nullptr;
  Var ref;
  Indexer indexer;
  std::vector<Atom> dynamic;
  size_t end = 0;  // offset just past the closing ']'
};

inline std::string_view kind_text(ParamKind k) {
  switch (k) {
    case ParamKind::integer: return "an integer such as 3";
    case ParamKind::boolean: return "True or False";
    case ParamKind::ints: return "a tuple of integers such as (0, 1) or (1,) or ()";
    case ParamKind::ints_or_none: return "a tuple of integers or None";
    case ParamKind::bools_or_none: return "a tuple of True/False or None";
    case ParamKind::int_lists: return "a tuple of integer tuples such as ((0, 0, 0), (1, 2, 0))";
    case ParamKind::dtype: return "a dtype such as float32 or int32";
    case ParamKind::dtype_or_none: return "a dtype such as float32, or None";
    case ParamKind::name: return "a name";
    case ParamKind::word_or_none: return "None or a word";
    case ParamKind::precision:
      return "None, a precision (DEFAULT, HIGH, HIGHEST) or a pair of them";
    case ParamKind::dot_dims: return "dimension numbers such as (([1], [0]), ([], []))";
    case ParamKind::jaxpr: return "a jaxpr { lambda ... }";
    case ParamKind::jaxprs: return "a parenthesized list of jaxprs";
    case ParamKind::indexer: return "an indexer";
    case ParamKind::number_or_none: return "a number or None";
    case ParamKind::gather_dims: return "GatherDimensionNumbers(offset_dims=(...), ...)";
    case ParamKind::scatter_dims: return "ScatterDimensionNumbers(update_window_dims=(...), ...)";
    case ParamKind::conv_dims: return "ConvDimensionNumbers(lhs_spec=(...), ...)";
    case ParamKind::raw_text: return "a value";
    case ParamKind::linear_solve_jaxprs:
      return "_LinearSolveTuple(matvec=<jaxpr>, vecmat=<jaxpr or None>, ...)";
    case ParamKind::linear_solve_counts: return "_LinearSolveTuple(matvec=1, vecmat=0, ...)";
  }
  return "a value";
}

class Parser {
 public:
  // `foreign`: the primitives of another system's text the parser also reads (the JAX
  // importer's, import/jax/rewrites.h); nullptr reads refjit's primitives only.
  Parser(std::string_view source, std::string file, const ForeignRewrites* foreign,
         const NamedJaxprs* known = nullptr)
      : toks_(text::tokenize(source)), file_(std::move(file)), foreign_(foreign), known_(known) {}

  Jaxpr parse();

 private:
  // ---- tokens -----------------------------------------------------------------------------

  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next();
  const Token& prev() const { return toks_[pos_ == 0 ? 0 : pos_ - 1]; }

  std::string loc(const Token& t) const { return fmt::format("{}:{}:{}: ", file_, t.line, t.col); }

  [[noreturn]] void fail(const Token& t, const std::string& message) const;

  const Token& expect(Tok kind, std::string_view what);
  void expect_keyword(std::string_view word, std::string_view context);

  int64_t integer_of(const Token& t) const;
  double real_of(const Token& t) const;
  int64_t expect_nonneg_int(std::string_view what);

  // ---- jaxprs and binders -----------------------------------------------------------------

  // JAX prints a sub-jaxpr used twice, or longer than ten equations, once before the program:
  // `let NAME = { lambda ... } in`, and refers to it as `jaxpr=NAME`. Each definition is kept
  // as one shared Jaxpr, so every use refers to the same object.
  void parse_shared_jaxprs();

  // Skips a `{ ... }` group at the current token.
  void skip_braced();

  // The shared jaxpr `name`, parsed on first use; nullptr when no `let` defines it.
  JaxprPtr shared_jaxpr(const std::string& name);

  Jaxpr parse_jaxpr(int depth);

  Binder parse_binder(std::string_view what);

  void declare(Scope& s, const Binder& b, Var v);

  Type parse_type();

  // JAX's typed PRNG keys, `key<fry>[s]`: refjit holds a threefry key as its two uint32 words,
  // u32[s..., 2] (import/jax/prng.cpp reads the random_* primitives on that layout).
  ArrayType parse_key_type();

  ArrayType parse_array_type();
  void skip_varying_axes();  // `{V:x}` after a type inside shard_map: varying axes, dropped
  void skip_dim_sharding();  // `@x` or `@(x,y)` after a dim size: explicit sharding, dropped
  void skip_axis_names(Tok close, std::string_view where);  // `x, y` then `close`

  // JAX prints an output that is a dropped binder as `_`. With m such outputs they are taken
  // to be the last m binders written `_`, in order (a jit whose caller drops two results prints
  // `in (_, _)`); a single one is the most recent.
  std::vector<Atom> parse_outvars(Scope& s);

  // ---- atoms ------------------------------------------------------------------------------

  static bool is_literal_word(std::string_view w);
  static bool is_number(const Token& t) {
    return t.is(Tok::integer) || t.is(Tok::real) || t.is(Tok::complex);
  }
  std::pair<double, double> complex_of(const Token& v) const;

  // `3:i32[]` at the current token (the value, a ':' and a scalar dtype).
  bool at_typed_literal() const;

  Literal literal_value(const Token& v, DType d) const;

  Literal parse_typed_literal();
  // JAX's float0 literal, `(b'',):float0[]` (the zero tangent of an integer value), read as
  // False:bool[] (docs/ir.md).
  bool at_float0_literal() const;
  Literal parse_float0_literal();

  // A literal written without its type (older JAX printouts): it takes `hint`'s dtype when the
  // kinds agree, else i32 / f32 / bool.
  Literal bare_literal(const Token& v, std::optional<DType> hint) const;

  Var lookup(Scope& s, const Token& t) const;

  // A var, a typed literal, or a bare literal.
  Atom parse_value_atom(Scope& s, std::optional<DType> hint, std::string_view what);

  // ---- equations --------------------------------------------------------------------------

  // At `name [`: does a `<-` or `+=` follow the matching ']' (a ref write)?
  bool ref_write_follows() const;

  void parse_eqn(Scope& s, int depth);

  // outs = prim[params] operands
  void parse_generic(Scope& s, std::vector<Binder> outs, int depth);

  // Shape primitives on key arrays name only the key dims; the u32 words are one more dim at
  // the end, taken whole.
  void adapt_to_key_layout(const Token& at, Prim prim, Params& params);

  // A jit body whose outputs JAX printed as `_` (its caller drops them): pick for each the
  // latest `_` binder of the type the caller's binder has, so the types agree (the values are
  // never read).
  void retype_underscore_outputs(Params& params, const std::vector<Binder>& outs);

  // At `name[`: is this JAX's form of the primitive, read by `rw` (its first param is one
  // that only the rewrite knows)? A primitive written without params is refjit's own form.
  bool foreign_form_follows(const ForeignRewrite& rw, Prim native) const;

  // outs = foreign_prim[params] operands, read through its rewrite (ir/foreign_rewrites.h).
  // Runs a rewrite on parsed operands and binds its results to `outs`, checking their types.
  void expand_and_bind(Scope& s, const Token& at, std::string_view name,
                       const std::function<std::vector<Atom>(text::RewriteArgs&)>& expand,
                       std::vector<Atom> atoms, const Params& params, std::vector<Binder> outs);

  void parse_rewrite(Scope& s, const Token& at, const ForeignRewrite& rw, std::vector<Binder> outs,
                     int depth);

  // Operands run until the next equation (a binder, `name[`), ';' or `in (`.
  std::vector<Atom> parse_operands(Scope& s);

  // JAX's binary operations broadcast dims of size 1 implicitly (f32[3,1] * f32[1,4] is
  // f32[3,4]). refjit's IR keeps broadcasts explicit, so every later rule (types, JVP,
  // transpose, lowering) sees equal shapes: the parser inserts a broadcast_in_dim for each
  // operand whose shape differs from the common one. Scalars are left alone (the binary rules
  // accept them); shapes that cannot broadcast are left for the type rule to report.
  void broadcast_size1_dims(Scope& s, std::vector<Atom>& atoms);

  // JAX's dot_general takes operands of different dtypes (bool or int8 times f32, bf16 times
  // f32) and computes in preferred_element_type; argmax takes bools. refjit's rules want
  // one numeric dtype: the parser converts such operands first (exactly: every bool, int8 or
  // bf16 value is a value of the wider type, and a bool's order is its integer's).
  void convert_mixed_operands(Scope& s, Prim prim, std::vector<Atom>& atoms, const Params& params);

  static bool is_broadcasting_binary(Prim p);

  // JAX hides broadcast_in_dim's shape (the binder's) and an empty broadcast_dimensions.
  void fill_hidden_broadcast_params(Scope& s, Params& params, const std::vector<Atom>& ins,
                                    const std::vector<Binder>& outs);

  // b:T <- ref[idx]
  void parse_get(Scope& s, std::vector<Binder> outs);

  // o:T, ref[idx] <- ref[idx], v
  void parse_swap(Scope& s, std::vector<Binder> outs);

  // ref[idx] <- v  (a swap whose old value is dropped)   or   ref[idx] += v  (addupdate)
  void parse_ref_write(Scope& s);

  void emit_write(Scope& s, const Place& p, Prim prim, Atom value, const std::vector<Binder>& outs);

  DType ref_dtype(Scope& s, const Place& p) const;

  std::string place_text(const Place& p) const;

  // ref[idx]: `...` or one entry per leading dim, comma separated.
  Place parse_place(Scope& s);

  // A dynamic index part: a variable, or a typed literal.
  std::optional<Atom> parse_index_operand(Scope& s);

  void parse_index_dim(Scope& s, int64_t dim, Place& p);

  int64_t expect_stride();

  // After `start:`: [end] [: [stride]].
  void static_slice(int64_t start, int64_t dim, IndexerDim& d);

  // Adds the eqn with outputs typed as written, after checking them against the type rule
  // (so a mismatch is reported at its line).
  void emit(Scope& s, const Token& at, Prim prim, std::vector<Atom> ins, Params params,
            const std::vector<Binder>& outs, bool ref_form = false);

  // ---- params -----------------------------------------------------------------------------

  // `[name=value ...]`: each value is skipped when `ignored(name)`, else read as `spec_of(name)`
  // says; a name with no spec is an error worded by `unknown(name token)`.
  void parse_param_list(Params& params, int depth,
                        const std::function<bool(std::string_view)>& ignored,
                        const std::function<const text::ParamSpec*(std::string_view)>& spec_of,
                        const std::function<std::string(const Token&)>& unknown);

  // params of a JAX rewrite: its own specs, and names it ignores.
  void parse_params_with(std::string_view prim, const std::vector<text::ParamSpec>& specs,
                         const std::vector<std::string_view>& ignored, Params& params, int depth);

  void parse_params(Prim prim, Params& params, int depth);

  std::string unknown_param_message(Prim prim, const Token& nt) const;

  // Skips a value refjit ignores (JAX's shardings, meshes, ...): everything up to the next
  // `name=` or the closing ']' outside brackets.
  void skip_value();

  // The adjacent tokens at the current position, as one word: take, <lambda>, f.g
  std::string read_word();

  Value parse_value(int depth);

  // np.int64(1), np.float32(0.5), np.True_ ...: NumPy scalars print as their constructor
  // call; the value inside is what counts.
  Value numpy_scalar(const Value& ctor, int depth);

  // `let NAME = { ... } in { lambda ... }` as a param value.
  Value jaxpr_with_own_lets(int depth);

  // Name(field=value, ...): the repr of a Python object such as GatherDimensionNumbers.
  Value record(Value v, int depth);

  [[noreturn]] void unknown_shared(const text::ParamSpec& spec, const Value& v) const;

  [[noreturn]] void bad_value(const text::ParamSpec& spec, const Value& v) const;

  IntList ints_of(const text::ParamSpec& spec, const Value& v) const;

  // Which of `fields` a `Name(field=value, ...)` record's item sets; fails naming the record's
  // fields for another name.
  size_t field_index(const Value& record, const Value& item,
                     std::span<const std::string_view> fields) const;

  ParamValue parse_param(const text::ParamSpec& spec, int depth);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::string file_;
  // `let NAME = { ... } in` definitions: where each starts, and each once parsed.
  std::map<std::string, size_t> shared_at_;
  const ForeignRewrites* foreign_;
  const NamedJaxprs* known_;  // named jaxprs from outside the text (parse_jaxpr's `known`)
  std::unordered_map<std::string, JaxprPtr> shared_;
  std::set<std::string> parsing_shared_;
  // Outputs written `_` of each parsed sub-jaxpr, and that jaxpr's `_` binders.
  struct UnderscoreOutputs {
    std::vector<size_t> positions;
    std::vector<Var> dropped;
  };
  UnderscoreOutputs pending_underscores_;  // of the jaxpr whose outputs were parsed last
  std::unordered_map<const Jaxpr*, UnderscoreOutputs> underscore_outputs_;
};

}  // namespace refjit::text::parser
