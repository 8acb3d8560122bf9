// parse_jaxpr: reads the jaxpr text format (docs/ir.md), ours or as JAX prints it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/jax_rewrites.h"
#include "ir/lexer.h"
#include "ir/text_params.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"

namespace refjit {

namespace {

using text::ParamKind;
using text::Tok;
using text::Token;

// Bounds nesting of sub-jaxprs and tuples, so hostile input cannot exhaust the stack.
constexpr int kMaxDepth = 100;
// Larger dimensions are certainly typos and would overflow element counts.
constexpr int64_t kMaxDim = int64_t{1} << 40;

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

std::string_view kind_text(ParamKind k) {
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
    case ParamKind::dot_dims: return "dimension numbers such as (([1], [0]), ([], []))";
    case ParamKind::jaxpr: return "a jaxpr { lambda ... }";
    case ParamKind::jaxprs: return "a parenthesized list of jaxprs";
    case ParamKind::indexer: return "an indexer";
    case ParamKind::number_or_none: return "a number or None";
    case ParamKind::gather_dims: return "GatherDimensionNumbers(offset_dims=(...), ...)";
    case ParamKind::scatter_dims: return "ScatterDimensionNumbers(update_window_dims=(...), ...)";
  }
  return "a value";
}

class Parser {
 public:
  Parser(std::string_view source, std::string file)
      : toks_(text::tokenize(source)), file_(std::move(file)) {}

  Jaxpr parse() {
    parse_shared_jaxprs();
    Jaxpr j = parse_jaxpr(0);
    if (!peek().is(Tok::end))
      fail(peek(), fmt::format("expected end of input after the jaxpr's closing '}}', found {}",
                               text::describe(peek())));
    return j;
  }

 private:
  // ---- tokens -----------------------------------------------------------------------------

  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  const Token& prev() const { return toks_[pos_ == 0 ? 0 : pos_ - 1]; }

  std::string loc(const Token& t) const { return fmt::format("{}:{}:{}: ", file_, t.line, t.col); }

  [[noreturn]] void fail(const Token& t, const std::string& message) const {
    throw ParseError(file_, t.line, t.col, message);
  }

  const Token& expect(Tok kind, std::string_view what) {
    if (!peek().is(kind))
      fail(peek(), fmt::format("expected {}, found {}", what, text::describe(peek())));
    return next();
  }
  void expect_keyword(std::string_view word, std::string_view context) {
    if (!peek().is_ident(word))
      fail(peek(),
           fmt::format("expected '{}' {}, found {}", word, context, text::describe(peek())));
    next();
  }

  int64_t integer_of(const Token& t) const {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      fail(t, fmt::format("integer {} does not fit in 64 bits", text::describe(t)));
    return v;
  }
  double real_of(const Token& t) const {
    std::string s(t.text);
    return std::strtod(s.c_str(), nullptr);
  }
  int64_t expect_nonneg_int(std::string_view what) {
    const Token& t = expect(Tok::integer, what);
    int64_t v = integer_of(t);
    if (v < 0) fail(t, fmt::format("expected {}, found negative {}", what, text::describe(t)));
    return v;
  }

  // ---- jaxprs and binders -----------------------------------------------------------------

  // JAX prints a sub-jaxpr used twice, or longer than ten equations, once before the program:
  // `let NAME = { lambda ... } in`, and refers to it as `jaxpr=NAME`. Each definition is kept
  // as one shared Jaxpr, so every use refers to the same object.
  void parse_shared_jaxprs() {
    // JAX prints them in the order it found them, so one may use a later one: record where
    // each starts first, then parse each on first use.
    while (peek().is_ident("let") && peek(1).is(Tok::ident) && peek(2).is(Tok::equal)) {
      next();
      const Token& name = next();
      next();  // =
      if (shared_at_.count(std::string(name.text)))
        fail(name, fmt::format("shared jaxpr {} is defined twice", text::describe(name)));
      shared_at_[std::string(name.text)] = pos_;
      skip_braced();
      expect_keyword("in", "after a shared jaxpr 'let NAME = { lambda ... }'");
    }
    size_t after = pos_;
    for (const auto& [name, at] : shared_at_) shared_jaxpr(name);
    pos_ = after;
  }

  // Skips a `{ ... }` group at the current token.
  void skip_braced() {
    expect(Tok::lbrace, "'{' to start a jaxpr");
    for (int depth = 1; depth > 0;) {
      const Token& t = next();
      if (t.is(Tok::end)) fail(t, "end of input inside a shared jaxpr; a '}' is missing");
      if (t.is(Tok::lbrace)) ++depth;
      if (t.is(Tok::rbrace)) --depth;
    }
  }

  // The shared jaxpr `name`, parsed on first use; nullptr when no `let` defines it.
  JaxprPtr shared_jaxpr(const std::string& name) {
    if (auto it = shared_.find(name); it != shared_.end()) return it->second;
    auto at = shared_at_.find(name);
    if (at == shared_at_.end()) return nullptr;
    if (!parsing_shared_.insert(name).second)
      fail(toks_[at->second], fmt::format("shared jaxpr '{}' refers to itself", name));
    if (parsing_shared_.size() > kMaxDepth)
      fail(toks_[at->second], "shared jaxprs refer to each other too deeply");
    size_t saved = pos_;
    pos_ = at->second;
    auto j = std::make_shared<const Jaxpr>(parse_jaxpr(1));
    pos_ = saved;
    parsing_shared_.erase(name);
    shared_[name] = j;
    return j;
  }

  Jaxpr parse_jaxpr(int depth) {
    if (depth > kMaxDepth) fail(peek(), "jaxprs are nested too deeply");
    expect(Tok::lbrace, "'{' to start a jaxpr");
    expect_keyword("lambda", "after '{'");
    Scope s;
    while (!peek().is(Tok::semi)) {
      Binder b = parse_binder("a constvar binder such as 'a:f32[3]' or ';'");
      declare(s, b, s.builder.add_constvar(b.type, b.dropped ? "" : b.name));
    }
    next();
    while (!peek().is(Tok::dot)) {
      Binder b = parse_binder("an input binder such as 'a:f32[3]' or '.' before 'let'");
      declare(s, b, s.builder.add_invar(b.type, b.dropped ? "" : b.name));
    }
    next();
    expect_keyword("let", "after the binders' '.'");
    for (;;) {
      while (peek().is(Tok::semi)) next();
      if (peek().is_ident("in") && peek(1).is(Tok::lparen)) break;
      parse_eqn(s, depth);
    }
    next();  // in
    s.builder.set_outvars(parse_outvars(s));
    expect(Tok::rbrace, "'}' to close the jaxpr");
    return s.builder.finish();
  }

  Binder parse_binder(std::string_view what) {
    const Token& t = peek();
    if (!t.is(Tok::ident) || !peek(1).is(Tok::colon))
      fail(t, fmt::format("expected {}, found {}", what, text::describe(t)));
    next();
    next();  // :
    bool key = peek().is_ident("key");
    Binder b{&t, std::string(t.text), t.text == "_", parse_type(), key};
    return b;
  }

  void declare(Scope& s, const Binder& b, Var v) {
    if (b.key) s.keys.insert(v.id);
    if (b.dropped) {
      s.builder.jaxpr().vars[v.id].dropped = true;
      s.dropped.push_back(v);
      return;
    }
    if (auto it = s.bound_at.find(b.name); it != s.bound_at.end())
      fail(*b.tok, fmt::format("variable '{}' is bound a second time (first bound at {}:{}); "
                               "every variable is bound once in its jaxpr",
                               b.name, it->second->line, it->second->col));
    s.vars[b.name] = v;
    s.bound_at[b.name] = b.tok;
  }

  Type parse_type() {
    if (peek().is_ident("Ref")) {
      next();
      expect(Tok::lbrace, "'{' after 'Ref' (a ref type is written Ref{f32[3]})");
      ArrayType a = parse_array_type();
      expect(Tok::rbrace, "'}' to close the Ref type");
      return Type::ref(std::move(a));
    }
    return parse_array_type();
  }

  // JAX's typed PRNG keys, `key<fry>[s]`: refjit holds a threefry key as its two uint32 words,
  // u32[s..., 2] (ir/jax_rewrites.cpp reads the random_* primitives on that layout).
  ArrayType parse_key_type() {
    const Token& k = next();  // key
    if (!peek().is(Tok::other) || peek().text != "<" || !peek(1).is(Tok::ident) ||
        !peek(2).is(Tok::other) || peek(2).text != ">")
      fail(k, "expected a key type such as key<fry>[]");
    const Token& impl = peek(1);
    if (impl.text != "fry")
      fail(impl, fmt::format("PRNG implementation '{}' is not supported; refjit has threefry "
                             "keys (key<fry>), JAX's default",
                             impl.text));
    next();
    next();
    next();
    ArrayType a{DType::u32, {}};
    expect(Tok::lbracket, "'[' after key<fry>");
    while (!peek().is(Tok::rbracket)) {
      a.shape.push_back(expect_nonneg_int("a dimension size"));
      if (peek().is(Tok::comma)) next();
    }
    next();
    a.shape.push_back(2);
    return a;
  }

  ArrayType parse_array_type() {
    if (peek().is_ident("key") && peek(1).is(Tok::other)) return parse_key_type();
    const Token& t = peek();
    if (!t.is(Tok::ident))
      fail(t, fmt::format("expected a type such as f32[3] or Ref{{f32[3]}}, found {}",
                          text::describe(t)));
    std::optional<DType> d = parse_dtype(t.text);
    if (!d)
      fail(t, fmt::format("unknown dtype {} (refjit has f32, f64, i32, i64 and bool)",
                          text::describe(t)));
    next();
    ArrayType a{*d, {}};
    expect(Tok::lbracket, "'[' after the dtype (a scalar is written f32[])");
    if (!peek().is(Tok::rbracket)) {
      for (;;) {
        const Token& dt = peek();
        int64_t n = expect_nonneg_int("a dimension size");
        if (n > kMaxDim) fail(dt, fmt::format("dimension {} is too large", n));
        a.shape.push_back(n);
        if (!peek().is(Tok::comma)) break;
        next();
      }
    }
    expect(Tok::rbracket, "',' or ']' in the shape");
    return a;
  }

  // JAX prints an output that is a dropped binder as `_`. With m such outputs they are taken
  // to be the last m binders written `_`, in order (a jit whose caller drops two results prints
  // `in (_, _)`); a single one is the most recent.
  std::vector<Atom> parse_outvars(Scope& s) {
    expect(Tok::lparen, "'(' to start the outputs after 'in'");
    size_t underscores = 0;
    for (size_t k = 0; !peek(k).is(Tok::rparen) && !peek(k).is(Tok::end); ++k)
      underscores += peek(k).is_ident("_");
    size_t next_dropped = s.dropped.size() - std::min(underscores, s.dropped.size());
    std::vector<Atom> outs;
    pending_underscores_ = {};
    pending_underscores_.dropped = s.dropped;
    while (!peek().is(Tok::rparen)) {
      const Token& t = peek();
      if (t.is_ident("_")) {
        next();
        if (s.dropped.empty())
          fail(t,
               "output '_' names no dropped binder; only a binder written '_' can be returned "
               "as '_'");
        pending_underscores_.positions.push_back(outs.size());
        outs.push_back(s.dropped[std::min(next_dropped++, s.dropped.size() - 1)]);
      } else {
        outs.push_back(parse_value_atom(s, std::nullopt, "an output variable or literal"));
      }
      if (peek().is(Tok::comma)) {
        next();
      } else if (!peek().is(Tok::rparen)) {
        fail(peek(),
             fmt::format("expected ',' or ')' in the outputs, found {}", text::describe(peek())));
      }
    }
    next();
    return outs;
  }

  // ---- atoms ------------------------------------------------------------------------------

  static bool is_literal_word(std::string_view w) {
    return w == "True" || w == "False" || w == "inf" || w == "nan";
  }
  static bool is_number(const Token& t) { return t.is(Tok::integer) || t.is(Tok::real); }

  // `3:i32[]` at the current token (the value, a ':' and a scalar dtype).
  bool at_typed_literal() const {
    const Token& t = peek();
    if (!(is_number(t) || (t.is(Tok::ident) && is_literal_word(t.text)))) return false;
    if (!peek(1).is(Tok::colon) || !peek(2).is(Tok::ident) || !peek(3).is(Tok::lbracket))
      return false;
    // JAX may name a variable `inf`; a literal stays on the line of what precedes it.
    if (t.is(Tok::ident) && (t.text == "inf" || t.text == "nan") && prev().line != t.line)
      return false;
    return parse_dtype(peek(2).text).has_value();
  }

  Literal literal_value(const Token& v, DType d) const {
    auto bad = [&](std::string_view want) {
      fail(v, fmt::format("{} is not a valid {} literal (expected {})", text::describe(v),
                          short_name(d), want));
    };
    if (d == DType::bool_) {
      if (v.is_ident("True")) return Literal::of_bool(true);
      if (v.is_ident("False")) return Literal::of_bool(false);
      bad("True or False");
    }
    if (is_int(d)) {
      if (!v.is(Tok::integer)) bad("an integer");
      std::optional<Literal> x = Literal::parse_int(d, v.text);
      if (!x) fail(v, fmt::format("{} is out of range for {}", v.text, short_name(d)));
      return *x;
    }
    if (v.is(Tok::integer) || v.is(Tok::real)) return Literal::of(d, real_of(v));
    if (v.is_ident("inf")) return Literal::of(d, INFINITY);
    if (v.is_ident("nan")) return Literal::of(d, NAN);
    bad("a number");
    return {};
  }

  Literal parse_typed_literal() {
    const Token& v = next();
    next();  // :
    ArrayType t = parse_array_type();
    if (!t.is_scalar())
      fail(v, fmt::format("literal {} has type {}; literals are scalars such as 2.0:f32[]",
                          text::describe(v), t.str()));
    return literal_value(v, t.dtype);
  }

  // A literal written without its type (older JAX printouts): it takes `hint`'s dtype when the
  // kinds agree, else i32 / f32 / bool.
  Literal bare_literal(const Token& v, std::optional<DType> hint) const {
    DType d;
    if (v.is_ident("True") || v.is_ident("False")) {
      d = DType::bool_;
    } else if (v.is(Tok::integer)) {
      d = hint && !is_bool(*hint) ? *hint : DType::i32;
    } else {
      d = hint && is_float(*hint) ? *hint : DType::f32;
    }
    return literal_value(v, d);
  }

  Var lookup(Scope& s, const Token& t) const {
    if (t.text == "_") {
      // JAX prints dead code inside a sub-jaxpr whose results its caller drops with `_` for
      // both the binders and their uses (`_:f32[2] = mul _ _`). Nothing reads those values, so
      // a use of `_` stands for the most recent `_` binder.
      if (s.dropped.empty())
        fail(t, "'_' is a dropped binder and cannot be read; give the binder a name");
      return s.dropped.back();
    }
    auto it = s.vars.find(std::string(t.text));
    if (it == s.vars.end())
      fail(t, fmt::format("undefined variable {}; variables must be bound before they are used "
                          "(a sub-jaxpr sees only its own binders)",
                          text::describe(t)));
    return it->second;
  }

  // A var, a typed literal, or a bare literal.
  Atom parse_value_atom(Scope& s, std::optional<DType> hint, std::string_view what) {
    const Token& t = peek();
    if (at_typed_literal()) return parse_typed_literal();
    if (is_number(t) || t.is_ident("True") || t.is_ident("False")) {
      next();
      return bare_literal(t, hint);
    }
    if (t.is(Tok::ident)) {
      next();
      return lookup(s, t);
    }
    fail(t, fmt::format("expected {}, found {}", what, text::describe(t)));
  }

  // ---- equations --------------------------------------------------------------------------

  // At `name [`: does a `<-` or `+=` follow the matching ']' (a ref write)?
  bool ref_write_follows() const {
    size_t k = 1;
    int depth = 0;
    for (;; ++k) {
      const Token& t = peek(k);
      if (t.is(Tok::end)) return false;
      if (t.is(Tok::lbracket)) ++depth;
      if (t.is(Tok::rbracket) && --depth == 0) break;
    }
    const Token& after = peek(k + 1);
    return after.is(Tok::arrow) || after.is(Tok::plus_eq);
  }

  void parse_eqn(Scope& s, int depth) {
    const Token& t = peek();
    if (!t.is(Tok::ident))
      fail(t, fmt::format("expected an equation or 'in (...)', found {}", text::describe(t)));
    if (peek(1).is(Tok::colon)) {
      std::vector<Binder> outs;
      while (peek().is(Tok::ident) && peek(1).is(Tok::colon))
        outs.push_back(parse_binder("a binder"));
      const Token& op = peek();
      if (op.is(Tok::equal)) {
        next();
        parse_generic(s, std::move(outs), depth);
      } else if (op.is(Tok::arrow)) {
        parse_get(s, std::move(outs));
      } else if (op.is(Tok::comma)) {
        parse_swap(s, std::move(outs));
      } else {
        fail(op, fmt::format("expected '=' (or '<-' for a ref read) after the binders, found {}",
                             text::describe(op)));
      }
      return;
    }
    if (peek(1).is(Tok::lbracket) && ref_write_follows()) {
      parse_ref_write(s);
      return;
    }
    parse_generic(s, {}, depth);
  }

  // outs = prim[params] operands
  void parse_generic(Scope& s, std::vector<Binder> outs, int depth) {
    const Token& pt = peek();
    if (!pt.is(Tok::ident))
      fail(pt, fmt::format("expected a primitive name, found {}", text::describe(pt)));
    std::optional<Prim> prim = prim_from_name(pt.text);
    if (const text::JaxRewrite* rw = text::find_jax_rewrite(pt.text);
        rw && (!prim || jax_form_follows(*rw))) {
      next();
      parse_rewrite(s, pt, *rw, std::move(outs), depth);
      return;
    }
    if (!prim)
      fail(pt, fmt::format("unknown primitive {} (docs/primitives.md lists refjit's "
                           "primitives)",
                           text::describe(pt)));
    next();
    switch (*prim) {
      case Prim::get: fail(pt, "a ref read is written 'b:f32[1] <- a[c:c+1]', not as 'get'");
      case Prim::swap:
        fail(pt,
             "a ref write is written 'a[...] <- v' or 'o:f32[], a[...] <- a[...], v', not as "
             "'swap'");
      case Prim::addupdate:
        fail(pt, "an in-place add is written 'a[c:c+1] += v', not as 'addupdate'");
      default: break;
    }
    Params params;
    if (peek().is(Tok::lbracket)) parse_params(*prim, params, depth);
    if (*prim == Prim::jit) retype_underscore_outputs(params, outs);
    std::vector<Atom> atoms = parse_operands(s);
    if (*prim == Prim::broadcast_in_dim) fill_hidden_broadcast_params(s, params, atoms, outs);
    if (is_broadcasting_binary(*prim)) broadcast_size1_dims(s, atoms);
    if (!atoms.empty() && is_var(atoms[0]) && s.keys.count(as_var(atoms[0]).id))
      adapt_to_key_layout(pt, *prim, params);
    emit(s, pt, *prim, std::move(atoms), std::move(params), outs);
  }

  // Shape primitives on key arrays name only the key dims; the u32 words are one more dim at
  // the end, taken whole.
  void adapt_to_key_layout(const Token& at, Prim prim, Params& params) {
    auto append = [&](const char* name, int64_t v) {
      IntList l = params.get<IntList>(name);
      l.push_back(v);
      params.set(name, l);
    };
    switch (prim) {
      case Prim::slice:
        append("start_indices", 0);
        append("limit_indices", 2);
        if (params.get_or<IntList>("strides", {}).size()) append("strides", 1);
        return;
      case Prim::reshape: append("new_sizes", 2); return;
      case Prim::broadcast_in_dim: {
        IntList shape = params.get<IntList>("shape");
        append("broadcast_dimensions", static_cast<int64_t>(shape.size()) - 1);
        return;  // shape came from the binder, which already has the words
      }
      case Prim::squeeze:
      case Prim::expand_dims:
      case Prim::concatenate:
      case Prim::jit:
      case Prim::scan:
      case Prim::cond:
      case Prim::copy: return;
      default:
        fail(at, fmt::format("'{}' on a PRNG key array is not supported; refjit reads slice, "
                             "squeeze, expand_dims, reshape, broadcast_in_dim and concatenate "
                             "of keys",
                             prim_name(prim)));
    }
  }

  // A jit body whose outputs JAX printed as `_` (its caller drops them): pick for each the
  // latest `_` binder of the type the caller's binder has, so the types agree (the values are
  // never read).
  void retype_underscore_outputs(Params& params, const std::vector<Binder>& outs) {
    const JaxprPtr* body = std::get_if<JaxprPtr>(params.find("jaxpr"));
    if (!body || !*body) return;
    auto it = underscore_outputs_.find(body->get());
    if (it == underscore_outputs_.end() || (*body)->outvars.size() != outs.size()) return;
    Jaxpr fixed = **body;
    for (size_t p : it->second.positions) {
      for (auto d = it->second.dropped.rbegin(); d != it->second.dropped.rend(); ++d)
        if (fixed.type_of(*d) == outs[p].type) {
          fixed.outvars[p] = *d;
          break;
        }
    }
    params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(fixed)));
  }

  // At `name[`: is this JAX's form of the primitive, read by `rw` (its first param is one
  // that only the rewrite knows)? A primitive written without params is refjit's own form.
  bool jax_form_follows(const text::JaxRewrite& rw) const {
    if (!peek(1).is(Tok::lbracket) || !peek(2).is(Tok::ident) || !peek(3).is(Tok::equal))
      return false;
    std::string_view first = peek(2).text;
    for (const auto& spec : rw.params)
      if (spec.name == first) return true;
    return std::find(rw.ignored.begin(), rw.ignored.end(), first) != rw.ignored.end();
  }

  // outs = jax_prim[params] operands, read through its rewrite (ir/jax_rewrites.h).
  void parse_rewrite(Scope& s, const Token& at, const text::JaxRewrite& rw,
                     std::vector<Binder> outs, int depth) {
    Params params;
    if (peek().is(Tok::lbracket)) parse_params_with(rw.name, rw.params, rw.ignored, params, depth);
    std::vector<Atom> atoms = parse_operands(s);
    std::vector<Type> out_types;
    for (const Binder& b : outs) out_types.push_back(b.type);
    text::RewriteArgs args{s.builder, std::move(atoms), params, out_types};
    std::vector<Atom> results;
    try {
      results = rw.expand(args);
    } catch (const RefError& e) {
      throw RefError(e.code(), loc(at) + "error: " + e.what());
    } catch (const TypeError& e) {
      throw TypeError(loc(at) + "error: " + e.what());
    }
    if (results.size() != outs.size())
      throw TypeError(loc(at) + fmt::format("error: {} produces {} value(s) but {} binder(s) are "
                                            "written",
                                            rw.name, results.size(), outs.size()));
    for (size_t k = 0; k < outs.size(); ++k) {
      const Binder& b = outs[k];
      Type t = s.builder.type_of(results[k]);
      if (!(t == b.type))
        throw TypeError(loc(*b.tok) + fmt::format("error: binder '{}' is written {} but {} "
                                                  "produces {}",
                                                  b.name, b.type.str(), rw.name, t.str()));
      Var v =
          is_var(results[k]) ? as_var(results[k]) : s.builder.add_eqn1(Prim::copy, {results[k]});
      if (b.dropped) {
        s.dropped.push_back(v);
      } else {
        // The binder names the rewrite's result (for the CLI's `NAME = VALUE`, and tests).
        std::string& name = s.builder.jaxpr().vars[v.id].name;
        if (name.empty()) name = b.name;
        declare(s, b, v);
      }
    }
  }

  // Operands run until the next equation (a binder, `name[`), ';' or `in (`.
  std::vector<Atom> parse_operands(Scope& s) {
    std::vector<const Token*> toks;
    std::vector<std::optional<Atom>> ins;
    std::optional<DType> hint;
    for (;;) {
      const Token& t = peek();
      if (t.is(Tok::semi)) {
        next();
        break;
      }
      if (at_typed_literal()) {
        toks.push_back(&t);
        ins.push_back(parse_typed_literal());
        continue;
      }
      if (is_number(t)) {
        toks.push_back(&next());
        ins.push_back(std::nullopt);
        continue;
      }
      if (!t.is(Tok::ident)) break;
      const Token& u = peek(1);
      if (u.is(Tok::colon) || u.is(Tok::lbracket) || (t.text == "in" && u.is(Tok::lparen))) break;
      // An unbound name of a primitive starts the next eqn, one without outputs or params
      // (`free_ref c`), which JAX separates by a line break only.
      if (!s.vars.count(std::string(t.text)) &&
          (prim_from_name(t.text) || text::find_jax_rewrite(t.text)))
        break;
      toks.push_back(&next());
      if (t.text == "True" || t.text == "False") {
        ins.push_back(std::nullopt);
        continue;
      }
      Var v = lookup(s, t);
      const Type& ty = s.builder.jaxpr().type_of(v);
      if (!hint && !ty.is_ref) hint = ty.dtype();
      ins.push_back(Atom(v));
    }
    std::vector<Atom> atoms;
    for (size_t k = 0; k < ins.size(); ++k)
      atoms.push_back(ins[k] ? *ins[k] : Atom(bare_literal(*toks[k], hint)));
    return atoms;
  }

  // JAX's binary operations broadcast dims of size 1 implicitly (f32[3,1] * f32[1,4] is
  // f32[3,4]). refjit's IR keeps broadcasts explicit, so every later rule (types, JVP,
  // transpose, lowering) sees equal shapes: the parser inserts a broadcast_in_dim for each
  // operand whose shape differs from the common one. Scalars are left alone (the binary rules
  // accept them); shapes that cannot broadcast are left for the type rule to report.
  void broadcast_size1_dims(Scope& s, std::vector<Atom>& atoms) {
    if (atoms.size() != 2) return;
    const Jaxpr& j = s.builder.jaxpr();
    Type tx = j.type_of(atoms[0]), ty = j.type_of(atoms[1]);
    if (tx.is_ref || ty.is_ref) return;
    const Shape& x = tx.shape();
    const Shape& y = ty.shape();
    if (x == y || x.empty() || y.empty() || x.size() != y.size()) return;
    Shape common(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k] != y[k] && x[k] != 1 && y[k] != 1) return;
      common[k] = x[k] == 1 ? y[k] : x[k];
    }
    for (Atom& a : atoms) {
      if (j.type_of(a).shape() == common) continue;
      IntList dims(common.size());
      for (size_t k = 0; k < dims.size(); ++k) dims[k] = static_cast<int64_t>(k);
      a = s.builder.add_eqn1(
          Prim::broadcast_in_dim, {a},
          Params{{"broadcast_dimensions", dims}, {"shape", IntList(common.begin(), common.end())}});
    }
  }

  static bool is_broadcasting_binary(Prim p) {
    switch (p) {
      case Prim::add:
      case Prim::add_any:
      case Prim::sub:
      case Prim::mul:
      case Prim::div:
      case Prim::max:
      case Prim::min:
      case Prim::pow:
      case Prim::eq:
      case Prim::ne:
      case Prim::lt:
      case Prim::le:
      case Prim::gt:
      case Prim::ge:
      case Prim::and_:
      case Prim::or_:
      case Prim::rem:
      case Prim::atan2:
      case Prim::xor_:
      case Prim::nextafter:
      case Prim::shift_left:
      case Prim::shift_right_logical:
      case Prim::shift_right_arithmetic: return true;
      default: return false;
    }
  }

  // JAX hides broadcast_in_dim's shape (the binder's) and an empty broadcast_dimensions.
  void fill_hidden_broadcast_params(Scope& s, Params& params, const std::vector<Atom>& ins,
                                    const std::vector<Binder>& outs) {
    if (outs.size() != 1) return;
    const Shape& out = outs[0].type.shape();
    if (!params.has("shape")) params.set("shape", IntList(out.begin(), out.end()));
    if (!params.has("broadcast_dimensions") && ins.size() == 1) {
      int64_t rank = s.builder.jaxpr().type_of(ins[0]).array.rank();
      IntList dims;
      for (int64_t k = static_cast<int64_t>(out.size()) - rank;
           k < static_cast<int64_t>(out.size()); ++k)
        if (k >= 0) dims.push_back(k);
      params.set("broadcast_dimensions", std::move(dims));
    }
  }

  // b:T <- ref[idx]
  void parse_get(Scope& s, std::vector<Binder> outs) {
    const Token& arrow = next();
    if (outs.size() != 1)
      fail(arrow, fmt::format("a ref read binds exactly one value, found {} binders", outs.size()));
    Place p = parse_place(s);
    std::vector<Atom> ins{p.ref};
    ins.insert(ins.end(), p.dynamic.begin(), p.dynamic.end());
    emit(s, *p.tok, Prim::get, std::move(ins), Params{{"indexer", p.indexer}}, outs);
  }

  // o:T, ref[idx] <- ref[idx], v
  void parse_swap(Scope& s, std::vector<Binder> outs) {
    const Token& comma = next();
    if (outs.size() != 1)
      fail(comma, fmt::format("a ref swap binds exactly one value, found {} binders", outs.size()));
    Place written = parse_place(s);
    expect(Tok::arrow, "'<-' in the swap 'o:T, r[idx] <- r[idx], v'");
    Place read = parse_place(s);
    if (read.ref != written.ref || !(read.indexer == written.indexer) ||
        read.dynamic != written.dynamic)
      fail(*read.tok, fmt::format("a swap reads and writes the same place: expected '{}' again "
                                  "after '<-'",
                                  place_text(written)));
    expect(Tok::comma, "',' before the value in the swap 'o:T, r[idx] <- r[idx], v'");
    Atom value = parse_value_atom(s, ref_dtype(s, written), "the value to store");
    emit_write(s, written, Prim::swap, std::move(value), outs);
  }

  // ref[idx] <- v  (a swap whose old value is dropped)   or   ref[idx] += v  (addupdate)
  void parse_ref_write(Scope& s) {
    Place p = parse_place(s);
    const Token& op = next();
    Atom value = parse_value_atom(s, ref_dtype(s, p), "the value to store");
    std::vector<Binder> outs;
    Prim prim = Prim::addupdate;
    if (op.is(Tok::arrow)) {
      prim = Prim::swap;
      Type vt = s.builder.jaxpr().type_of(value);
      outs.push_back(Binder{p.tok, "_", true, ArrayType{ref_dtype(s, p), vt.shape()}});
    }
    emit_write(s, p, prim, std::move(value), outs);
  }

  void emit_write(Scope& s, const Place& p, Prim prim, Atom value,
                  const std::vector<Binder>& outs) {
    std::vector<Atom> ins{p.ref, std::move(value)};
    ins.insert(ins.end(), p.dynamic.begin(), p.dynamic.end());
    emit(s, *p.tok, prim, std::move(ins), Params{{"indexer", p.indexer}}, outs, true);
  }

  DType ref_dtype(Scope& s, const Place& p) const {
    return s.builder.jaxpr().type_of(p.ref).dtype();
  }

  std::string place_text(const Place& p) const {
    return std::string(p.tok->text.data(), p.end - p.tok->offset);
  }

  // ref[idx]: `...` or one entry per leading dim, comma separated.
  Place parse_place(Scope& s) {
    Place p;
    const Token& name = expect(Tok::ident, "a ref variable");
    p.tok = &name;
    p.ref = lookup(s, name);
    const Type& rt = s.builder.jaxpr().type_of(p.ref);
    if (!rt.is_ref)
      fail(name, fmt::format("{} has type {}, not a Ref; only refs are indexed with "
                             "'<-' and '+='",
                             text::describe(name), rt.str()));
    expect(Tok::lbracket, "'[' after the ref");
    if (peek().is(Tok::ellipsis)) {
      next();
    } else if (!peek().is(Tok::rbracket)) {
      const Shape& dims = rt.shape();
      for (;;) {
        if (p.indexer.dims.size() >= dims.size())
          fail(peek(),
               fmt::format("too many indices for {} of type {}", text::describe(name), rt.str()));
        parse_index_dim(s, dims[p.indexer.dims.size()], p);
        if (!peek().is(Tok::comma)) break;
        next();
      }
    }
    const Token& close = expect(Tok::rbracket, "',' or ']' in the indexer");
    p.end = close.end_offset();
    return p;
  }

  // A dynamic index part: a variable, or a typed literal.
  std::optional<Atom> parse_index_operand(Scope& s) {
    if (at_typed_literal()) return Atom(parse_typed_literal());
    if (peek().is(Tok::ident)) return Atom(lookup(s, next()));
    return std::nullopt;
  }

  void parse_index_dim(Scope& s, int64_t dim, Place& p) {
    IndexerDim d;
    const Token& first = peek();
    if (first.is(Tok::colon)) {
      next();
      static_slice(0, dim, d);
    } else if (first.is(Tok::integer) && !at_typed_literal()) {
      int64_t start = expect_nonneg_int("an index");
      if (peek().is(Tok::colon)) {
        next();
        static_slice(start, dim, d);
      } else {
        d.kind = IndexerDim::Kind::index;
        d.start = start;
      }
    } else {
      std::optional<Atom> a = parse_index_operand(s);
      if (!a)
        fail(first, fmt::format("expected an index (':', '2:5', 'c:c+1', '3' or a variable), "
                                "found {}",
                                text::describe(first)));
      d.dynamic = true;
      p.dynamic.push_back(*a);
      if (peek().is(Tok::colon)) {
        // c:c+k[:stride]
        next();
        const Token& again = peek();
        std::optional<Atom> b = parse_index_operand(s);
        if (!b || !(*b == *a))
          fail(again, fmt::format("a dynamic slice is written 'c:c+k' with the same start twice; "
                                  "found {}",
                                  text::describe(again)));
        expect(Tok::plus, "'+' in the dynamic slice 'c:c+k'");
        d.size = expect_nonneg_int("the static slice size k in 'c:c+k'");
        if (peek().is(Tok::colon)) {
          next();
          d.stride = expect_stride();
        }
      } else {
        bool array = is_var(*a) && s.builder.jaxpr().type_of(as_var(*a)).array.rank() > 0;
        d.kind = array ? IndexerDim::Kind::index_array : IndexerDim::Kind::index;
      }
    }
    p.indexer.dims.push_back(d);
  }

  int64_t expect_stride() {
    const Token& t = peek();
    int64_t v = expect_nonneg_int("a slice stride");
    if (v == 0) fail(t, "a slice stride must be at least 1");
    return v;
  }

  // After `start:`: [end] [: [stride]].
  void static_slice(int64_t start, int64_t dim, IndexerDim& d) {
    int64_t end = dim;
    if (peek().is(Tok::integer)) end = expect_nonneg_int("a slice end");
    int64_t stride = 1;
    if (peek().is(Tok::colon)) {
      next();
      if (peek().is(Tok::integer)) stride = expect_stride();
    }
    d.kind = IndexerDim::Kind::slice;
    d.start = start;
    d.stride = stride;
    d.size = end > start ? (end - start + stride - 1) / stride : 0;
  }

  // Adds the eqn with outputs typed as written, after checking them against the type rule
  // (so a mismatch is reported at its line).
  void emit(Scope& s, const Token& at, Prim prim, std::vector<Atom> ins, Params params,
            const std::vector<Binder>& outs, bool ref_form = false) {
    Jaxpr& j = s.builder.jaxpr();
    std::vector<Type> in_types;
    for (const Atom& a : ins) in_types.push_back(j.type_of(a));
    std::vector<Type> inferred;
    try {
      inferred = infer_types(prim, in_types, params);
    } catch (const RefError& e) {
      throw RefError(e.code(), loc(at) + "error: " + e.what());
    } catch (const TypeError& e) {
      throw TypeError(loc(at) + "error: " + e.what());
    }
    if (inferred.size() != outs.size())
      throw TypeError(loc(at) + fmt::format("error: {} produces {} value(s) but {} binder(s) are "
                                            "written",
                                            prim_name(prim), inferred.size(), outs.size()));
    std::vector<Var> vars;
    for (size_t k = 0; k < outs.size(); ++k) {
      const Binder& b = outs[k];
      if (!ref_form || !b.dropped) {
        if (!(b.type == inferred[k]))
          throw TypeError(loc(*b.tok) +
                          fmt::format("error: binder '{}' is written {} but {} produces {}", b.name,
                                      b.type.str(), prim_name(prim), inferred[k].str()));
      }
      Type t = ref_form && b.dropped ? inferred[k] : b.type;
      vars.push_back(j.new_var(std::move(t), b.dropped, b.dropped ? "" : b.name));
    }
    s.builder.add_eqn_with_outs(prim, std::move(ins), std::move(params), vars);
    for (size_t k = 0; k < outs.size(); ++k) declare(s, outs[k], vars[k]);
  }

  // ---- params -----------------------------------------------------------------------------

  // `[name=value ...]`: each value is skipped when `ignored(name)`, else read as `spec_of(name)`
  // says; a name with no spec is an error worded by `unknown(name token)`.
  void parse_param_list(Params& params, int depth,
                        const std::function<bool(std::string_view)>& ignored,
                        const std::function<const text::ParamSpec*(std::string_view)>& spec_of,
                        const std::function<std::string(const Token&)>& unknown) {
    expect(Tok::lbracket, "'['");
    while (!peek().is(Tok::rbracket)) {
      const Token& nt = peek();
      if (!nt.is(Tok::ident) || !peek(1).is(Tok::equal))
        fail(nt, fmt::format("expected a param 'name=value' or ']', found {}", text::describe(nt)));
      next();
      next();  // =
      if (ignored(nt.text)) {
        skip_value();
        continue;
      }
      const text::ParamSpec* spec = spec_of(nt.text);
      if (!spec) fail(nt, unknown(nt));
      if (params.has(nt.text)) fail(nt, fmt::format("param {} is given twice", text::describe(nt)));
      params.set(std::string(nt.text), parse_param(*spec, depth));
    }
    next();
  }

  // params of a JAX rewrite: its own specs, and names it ignores.
  void parse_params_with(std::string_view prim, const std::vector<text::ParamSpec>& specs,
                         const std::vector<std::string_view>& ignored, Params& params, int depth) {
    parse_param_list(
        params, depth,
        [&](std::string_view n) {
          return n == "sharding" || n == "out_sharding" ||
                 std::find(ignored.begin(), ignored.end(), n) != ignored.end();
        },
        [&](std::string_view n) -> const text::ParamSpec* {
          auto it = std::find_if(specs.begin(), specs.end(),
                                 [&](const text::ParamSpec& sp) { return sp.name == n; });
          return it == specs.end() ? nullptr : &*it;
        },
        [&](const Token& nt) {
          std::vector<std::string_view> names;
          for (const auto& sp : specs) names.push_back(sp.name);
          return fmt::format("JAX's '{}' has no param {} that refjit knows (it reads: {})", prim,
                             text::describe(nt), fmt::join(names, ", "));
        });
  }

  void parse_params(Prim prim, Params& params, int depth) {
    parse_param_list(
        params, depth, [&](std::string_view n) { return text::is_ignored_param(prim, n); },
        [&](std::string_view n) -> const text::ParamSpec* {
          const text::ParamSpec* spec = text::find_param_spec(prim, n);
          return spec && spec->kind != ParamKind::indexer ? spec : nullptr;
        },
        [&](const Token& nt) { return unknown_param_message(prim, nt); });
  }

  std::string unknown_param_message(Prim prim, const Token& nt) const {
    std::vector<std::string> names;
    for (const auto& sp : text::param_specs(prim))
      if (sp.kind != ParamKind::indexer) names.push_back(std::string(sp.name));
    if (names.empty())
      return fmt::format("primitive '{}' takes no params, found {}", prim_name(prim),
                         text::describe(nt));
    return fmt::format("primitive '{}' has no param {} (its params: {})", prim_name(prim),
                       text::describe(nt), fmt::join(names, ", "));
  }

  // Skips a value refjit ignores (JAX's shardings, meshes, ...): everything up to the next
  // `name=` or the closing ']' outside brackets.
  void skip_value() {
    int depth = 0;
    bool first = true;
    for (;; first = false) {
      const Token& t = peek();
      if (t.is(Tok::end)) return;
      if (depth == 0 && !first) {
        if (t.is(Tok::rbracket)) return;
        if (t.is(Tok::ident) && peek(1).is(Tok::equal)) return;
      }
      if (t.is(Tok::lparen) || t.is(Tok::lbracket) || t.is(Tok::lbrace)) ++depth;
      if (t.is(Tok::rparen) || t.is(Tok::rbracket) || t.is(Tok::rbrace)) {
        if (depth == 0) return;
        --depth;
      }
      next();
    }
  }

  // The adjacent tokens at the current position, as one word: take, <lambda>, f.g
  std::string read_word() {
    const Token& first = peek();
    if (first.is(Tok::end) || first.is(Tok::rbracket))
      fail(first, fmt::format("expected a name, found {}", text::describe(first)));
    size_t end = first.offset;
    while (!peek().is(Tok::end) && !peek().is(Tok::rbracket) && !peek().is(Tok::lbracket) &&
           (peek().offset == end || &peek() == &first)) {
      end = next().end_offset();
    }
    return std::string(first.text.data(), end - first.offset);
  }

  Value parse_value(int depth) {
    if (depth > kMaxDepth) fail(peek(), "param value is nested too deeply");
    Value v;
    const Token& t = peek();
    v.tok = &t;
    if (t.is(Tok::lbrace)) {
      v.kind = Value::Kind::jaxpr;
      v.jaxpr = std::make_shared<const Jaxpr>(parse_jaxpr(depth + 1));
      if (!pending_underscores_.positions.empty())
        underscore_outputs_[v.jaxpr.get()] = std::move(pending_underscores_);
      return v;
    }
    if (t.is(Tok::lparen) || t.is(Tok::lbracket)) {
      Tok close = t.is(Tok::lparen) ? Tok::rparen : Tok::rbracket;
      v.kind = t.is(Tok::lparen) ? Value::Kind::tuple : Value::Kind::list;
      next();
      while (!peek().is(close)) {
        v.items.push_back(parse_value(depth + 1));
        if (peek().is(Tok::comma)) {
          next();
        } else if (!peek().is(close) && v.items.back().kind != Value::Kind::jaxpr) {
          // Jaxprs in a tuple (cond's branches) are separated by line breaks only.
          fail(peek(), fmt::format("expected ',' or '{}', found {}",
                                   close == Tok::rparen ? ")" : "]", text::describe(peek())));
        }
      }
      next();
      return v;
    }
    if (t.is(Tok::integer)) {
      v.kind = Value::Kind::integer;
      v.i = integer_of(next());
      return v;
    }
    if (t.is(Tok::real)) {
      v.kind = Value::Kind::real;
      v.d = real_of(next());
      return v;
    }
    if (t.is(Tok::ident)) {
      next();
      if (t.text == "None") {
        v.kind = Value::Kind::none;
        return v;
      }
      if (t.text == "True" || t.text == "False") {
        v.kind = Value::Kind::boolean;
        v.b = t.text == "True";
        return v;
      }
      v.kind = Value::Kind::word;
      v.word = std::string(t.text);
      // Dotted names: enum reprs such as GatherScatterMode.CLIP, NumPy's np.int64.
      while (peek().is(Tok::dot) && peek(1).is(Tok::ident) &&
             peek().offset == prev().end_offset()) {
        next();
        v.word += "." + std::string(next().text);
      }
      if (peek().is(Tok::lparen) && peek().offset == prev().end_offset()) {
        if (v.word.starts_with("np.") || v.word.starts_with("numpy."))
          return numpy_scalar(v, depth);
        return record(std::move(v), depth);
      }
      if (JaxprPtr shared = shared_jaxpr(v.word)) {
        v.kind = Value::Kind::jaxpr;
        v.jaxpr = std::move(shared);
      }
      return v;
    }
    fail(t, fmt::format("expected a param value, found {}", text::describe(t)));
  }

  // np.int64(1), np.float32(0.5), np.True_ ...: NumPy scalars print as their constructor
  // call; the value inside is what counts.
  Value numpy_scalar(const Value& ctor, int depth) {
    next();  // (
    Value inner = parse_value(depth + 1);
    if (inner.kind != Value::Kind::integer && inner.kind != Value::Kind::real &&
        inner.kind != Value::Kind::boolean)
      fail(*ctor.tok, fmt::format("expected a number inside {}(...)", ctor.word));
    expect(Tok::rparen, fmt::format("')' to close {}(...)", ctor.word));
    inner.tok = ctor.tok;
    return inner;
  }

  // Name(field=value, ...): the repr of a Python object such as GatherDimensionNumbers.
  Value record(Value v, int depth) {
    next();  // (
    v.kind = Value::Kind::record;
    while (!peek().is(Tok::rparen)) {
      const Token& f = peek();
      if (!f.is(Tok::ident) || !peek(1).is(Tok::equal))
        fail(f, fmt::format("expected 'field=value' inside {}(...), found {}", v.word,
                            text::describe(f)));
      next();
      next();  // =
      Value item = parse_value(depth + 1);
      item.field = std::string(f.text);
      v.items.push_back(std::move(item));
      if (peek().is(Tok::comma)) {
        next();
      } else if (!peek().is(Tok::rparen)) {
        fail(peek(), fmt::format("expected ',' or ')' in {}(...), found {}", v.word,
                                 text::describe(peek())));
      }
    }
    next();
    return v;
  }

  [[noreturn]] void unknown_shared(const text::ParamSpec& spec, const Value& v) const {
    fail(*v.tok, fmt::format("param '{}' names the jaxpr '{}', but no 'let {} = {{ lambda ... }} "
                             "in' before the program defines it",
                             spec.name, v.word, v.word));
  }

  [[noreturn]] void bad_value(const text::ParamSpec& spec, const Value& v) const {
    fail(*v.tok, fmt::format("param '{}' expects {}", spec.name, kind_text(spec.kind)));
  }

  IntList ints_of(const text::ParamSpec& spec, const Value& v) const {
    if (v.kind != Value::Kind::tuple && v.kind != Value::Kind::list) bad_value(spec, v);
    IntList out;
    for (const Value& x : v.items) {
      if (x.kind != Value::Kind::integer) bad_value(spec, x);
      out.push_back(x.i);
    }
    return out;
  }

  ParamValue parse_param(const text::ParamSpec& spec, int depth) {
    if (spec.kind == ParamKind::name) return read_word();
    Value v = parse_value(depth);
    bool none = v.kind == Value::Kind::none;
    switch (spec.kind) {
      case ParamKind::integer:
        if (v.kind != Value::Kind::integer) bad_value(spec, v);
        return v.i;
      case ParamKind::boolean:
        if (v.kind != Value::Kind::boolean) bad_value(spec, v);
        return v.b;
      case ParamKind::ints: return ints_of(spec, v);
      case ParamKind::ints_or_none:
        if (none) return NoneParam{};
        return ints_of(spec, v);
      case ParamKind::bools_or_none: {
        if (none) return NoneParam{};
        if (v.kind != Value::Kind::tuple) bad_value(spec, v);
        IntList out;
        for (const Value& x : v.items) {
          if (x.kind != Value::Kind::boolean) bad_value(spec, x);
          out.push_back(x.b ? 1 : 0);
        }
        return out;
      }
      case ParamKind::int_lists: {
        if (v.kind != Value::Kind::tuple) bad_value(spec, v);
        IntListList out;
        for (const Value& x : v.items) out.push_back(ints_of(spec, x));
        return out;
      }
      case ParamKind::dtype:
      case ParamKind::dtype_or_none: {
        if (none && spec.kind == ParamKind::dtype_or_none) return NoneParam{};
        std::optional<DType> d;
        if (v.kind == Value::Kind::word) d = parse_dtype(v.word);
        if (!d)
          fail(*v.tok, fmt::format("param '{}' expects a dtype (float32, float64, int32, int64 "
                                   "or bool), found {}",
                                   spec.name, text::describe(*v.tok)));
        return *d;
      }
      case ParamKind::word_or_none:
        if (none) return NoneParam{};
        if (v.kind != Value::Kind::word) bad_value(spec, v);
        return v.word;
      case ParamKind::dot_dims: {
        auto pair = [&](const Value& x) -> std::pair<IntList, IntList> {
          if (x.kind != Value::Kind::tuple || x.items.size() != 2) bad_value(spec, x);
          return {ints_of(spec, x.items[0]), ints_of(spec, x.items[1])};
        };
        if (v.kind != Value::Kind::tuple || v.items.size() != 2) bad_value(spec, v);
        DotDims dd;
        std::tie(dd.lhs_contract, dd.rhs_contract) = pair(v.items[0]);
        std::tie(dd.lhs_batch, dd.rhs_batch) = pair(v.items[1]);
        return dd;
      }
      case ParamKind::jaxpr:
        if (v.kind == Value::Kind::word) unknown_shared(spec, v);
        if (v.kind != Value::Kind::jaxpr) bad_value(spec, v);
        return v.jaxpr;
      case ParamKind::jaxprs: {
        if (v.kind != Value::Kind::tuple) bad_value(spec, v);
        JaxprList out;
        for (const Value& x : v.items) {
          if (x.kind == Value::Kind::word) unknown_shared(spec, x);
          if (x.kind != Value::Kind::jaxpr) bad_value(spec, x);
          out.push_back(x.jaxpr);
        }
        return out;
      }
      case ParamKind::number_or_none:
        if (none) return NoneParam{};
        if (v.kind == Value::Kind::integer) return static_cast<double>(v.i);
        if (v.kind == Value::Kind::real) return v.d;
        if (v.kind == Value::Kind::word && (v.word == "nan" || v.word == "inf"))
          return v.word == "nan" ? NAN : INFINITY;
        if (v.kind == Value::Kind::boolean) return v.b ? 1.0 : 0.0;
        bad_value(spec, v);
      case ParamKind::gather_dims:
      case ParamKind::scatter_dims: {
        std::span<const std::string_view> fields = spec.kind == ParamKind::gather_dims
                                                       ? std::span(text::kGatherDimsFields)
                                                       : std::span(text::kScatterDimsFields);
        if (v.kind != Value::Kind::record) bad_value(spec, v);
        IntListList out(fields.size());
        std::vector<bool> seen(fields.size());
        for (const Value& item : v.items) {
          auto it = std::find(fields.begin(), fields.end(), item.field);
          if (it == fields.end())
            fail(*item.tok, fmt::format("{}(...) has no field '{}' (its fields: {})", v.word,
                                        item.field, fmt::join(fields, ", ")));
          size_t k = static_cast<size_t>(it - fields.begin());
          out[k] = ints_of(spec, item);
          seen[k] = true;
        }
        for (size_t k = 0; k < fields.size(); ++k)
          if (!seen[k] && k < 3)  // the batching dims are optional (older JAX lacks them)
            fail(*v.tok, fmt::format("{}(...) is missing its field '{}'", v.word, fields[k]));
        return out;
      }
      case ParamKind::name:
      case ParamKind::indexer: break;
    }
    bad_value(spec, v);
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::string file_;
  // `let NAME = { ... } in` definitions: where each starts, and each once parsed.
  std::map<std::string, size_t> shared_at_;
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

}  // namespace

Jaxpr parse_jaxpr(std::string_view text, const std::string& filename) {
  Jaxpr j = Parser(text, filename).parse();
  verify(j);
  return j;
}

}  // namespace refjit
