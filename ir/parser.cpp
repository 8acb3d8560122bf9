// parse_jaxpr: reads the jaxpr text format (docs/ir.md), ours or as JAX prints it. This file:
// tokens, jaxprs, `let` definitions, binders, types and atoms (parser.h lists the others).
#include "ir/parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"

namespace refjit::text::parser {

namespace {

// "f32, f64, ..., u64": the dtypes a type may name.
std::string dtype_list() {
  std::vector<std::string_view> names;
  for (DType d : kAllDTypes) names.push_back(short_name(d));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

Jaxpr Parser::parse() {
  parse_shared_jaxprs();
  Jaxpr j = parse_jaxpr(0);
  if (!peek().is(Tok::end))
    fail(peek(), fmt::format("expected end of input after the jaxpr's closing '}}', found {}",
                             text::describe(peek())));
  return j;
}

const Token& Parser::next() {
  const Token& t = peek();
  if (pos_ + 1 < toks_.size()) ++pos_;
  return t;
}

[[noreturn]] void Parser::fail(const Token& t, const std::string& message) const {
  throw ParseError(file_, t.line, t.col, message);
}

const Token& Parser::expect(Tok kind, std::string_view what) {
  if (!peek().is(kind))
    fail(peek(), fmt::format("expected {}, found {}", what, text::describe(peek())));
  return next();
}

void Parser::expect_keyword(std::string_view word, std::string_view context) {
  if (!peek().is_ident(word))
    fail(peek(), fmt::format("expected '{}' {}, found {}", word, context, text::describe(peek())));
  next();
}

int64_t Parser::integer_of(const Token& t) const {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (ec != std::errc() || end != t.text.data() + t.text.size())
    fail(t, fmt::format("integer {} does not fit in 64 bits", text::describe(t)));
  return v;
}

double Parser::real_of(const Token& t) const {
  std::string s(t.text);
  return std::strtod(s.c_str(), nullptr);
}

int64_t Parser::expect_nonneg_int(std::string_view what) {
  const Token& t = expect(Tok::integer, what);
  int64_t v = integer_of(t);
  if (v < 0) fail(t, fmt::format("expected {}, found negative {}", what, text::describe(t)));
  return v;
}

void Parser::parse_shared_jaxprs() {
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

void Parser::skip_braced() {
  expect(Tok::lbrace, "'{' to start a jaxpr");
  for (int depth = 1; depth > 0;) {
    const Token& t = next();
    if (t.is(Tok::end)) fail(t, "end of input inside a shared jaxpr; a '}' is missing");
    if (t.is(Tok::lbrace)) ++depth;
    if (t.is(Tok::rbrace)) --depth;
  }
}

JaxprPtr Parser::shared_jaxpr(const std::string& name) {
  if (auto it = shared_.find(name); it != shared_.end()) return it->second;
  auto at = shared_at_.find(name);
  if (at == shared_at_.end()) {
    if (known_ == nullptr) return nullptr;
    auto k = known_->find(name);
    return k == known_->end() ? nullptr : k->second;
  }
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

Jaxpr Parser::parse_jaxpr(int depth) {
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

Binder Parser::parse_binder(std::string_view what) {
  const Token& t = peek();
  if (!t.is(Tok::ident) || !peek(1).is(Tok::colon))
    fail(t, fmt::format("expected {}, found {}", what, text::describe(t)));
  next();
  next();  // :
  bool key = peek().is_ident("key");
  Binder b{&t, std::string(t.text), t.text == "_", parse_type(), key};
  return b;
}

void Parser::declare(Scope& s, const Binder& b, Var v) {
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

Type Parser::parse_type() {
  if (peek().is_ident("Ref")) {
    next();
    expect(Tok::lbrace, "'{' after 'Ref' (a ref type is written Ref{f32[3]})");
    ArrayType a = parse_array_type();
    RefKind kind = RefKind::plain;
    if (peek().is(Tok::comma)) {  // Ref{f32[3], no_grad_no_remat}
      next();
      const Token& k = next();
      std::optional<RefKind> parsed = k.is(Tok::ident) ? parse_ref_kind(k.text) : std::nullopt;
      if (!parsed)
        fail(k,
             fmt::format("unknown ref kind {} (refjit knows no_grad_no_remat)", text::describe(k)));
      kind = *parsed;
    }
    expect(Tok::rbrace, "'}' to close the Ref type");
    return Type::ref(std::move(a), kind);
  }
  return parse_array_type();
}

ArrayType Parser::parse_key_type() {
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

ArrayType Parser::parse_array_type() {
  if (peek().is_ident("key") && peek(1).is(Tok::other)) return parse_key_type();
  const Token& t = peek();
  if (!t.is(Tok::ident))
    fail(t, fmt::format("expected a type such as f32[3] or Ref{{f32[3]}}, found {}",
                        text::describe(t)));
  std::optional<DType> d = parse_dtype(t.text);
  if (!d) fail(t, fmt::format("unknown dtype {} (refjit has {})", text::describe(t), dtype_list()));
  next();
  ArrayType a{*d, {}};
  expect(Tok::lbracket, "'[' after the dtype (a scalar is written f32[])");
  if (!peek().is(Tok::rbracket)) {
    for (;;) {
      const Token& dt = peek();
      int64_t n = expect_nonneg_int("a dimension size");
      if (n > kMaxDim) fail(dt, fmt::format("dimension {} is too large", n));
      a.shape.push_back(n);
      skip_dim_sharding();
      if (!peek().is(Tok::comma)) break;
      next();
    }
  }
  expect(Tok::rbracket, "',' or ']' in the shape");
  skip_varying_axes();
  return a;
}

// Inside shard_map, JAX writes after a type the mesh axes along which its value varies
// between shards (`f32[2,3]{V:data}`, check_vma=True). The same facts are in the program's
// pvary and psum_invariant eqns, which carry the autodiff meaning: the annotation is dropped.
void Parser::skip_varying_axes() {
  if (!(peek().is(Tok::lbrace) && peek(1).is_ident("V") && peek(2).is(Tok::colon))) return;
  next();
  next();
  next();
  skip_axis_names(Tok::rbrace, "the type's {V:...}");
}

// Mesh axis names separated by commas, up to and including `close`.
void Parser::skip_axis_names(Tok close, std::string_view where) {
  while (!peek().is(close)) {
    if (!peek().is(Tok::ident))
      fail(peek(),
           fmt::format("expected a mesh axis name in {}, found {}", where, text::describe(peek())));
    next();
    if (peek().is(Tok::comma)) next();
  }
  next();
}

// JAX's explicit sharding writes the mesh axes a dim is split over after its size (`4@x`,
// `8@(x,y)`). refjit runs on one process, where the values are the same whatever the
// placement: the annotation is read and dropped.
void Parser::skip_dim_sharding() {
  if (!(peek().is(Tok::other) && peek().text == "@")) return;
  next();
  if (peek().is(Tok::ident)) {
    next();
    return;
  }
  expect(Tok::lparen, "a mesh axis name or '(' after '@' in the shape");
  skip_axis_names(Tok::rparen, "the shape's sharding");
}

std::vector<Atom> Parser::parse_outvars(Scope& s) {
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

bool Parser::is_literal_word(std::string_view w) {
  return w == "True" || w == "False" || w == "inf" || w == "nan" || w == "infj" || w == "nanj";
}

// The parts of a complex token or word: `(1+2j)`, `-1.5j`, `infj`.
std::pair<double, double> Parser::complex_of(const Token& v) const {
  std::string t(v.text);
  if (t.front() == '(') t = t.substr(1, t.size() - 2);
  t.pop_back();  // j
  // The imaginary part starts at the last sign that is not the first character or part of
  // an exponent.
  size_t split = std::string::npos;
  for (size_t k = t.size(); k-- > 1;)
    if ((t[k] == '+' || t[k] == '-') && t[k - 1] != 'e' && t[k - 1] != 'E') {
      split = k;
      break;
    }
  if (split == std::string::npos) return {0.0, std::strtod(t.c_str(), nullptr)};
  return {std::strtod(t.substr(0, split).c_str(), nullptr),
          std::strtod(t.substr(split).c_str(), nullptr)};
}

bool Parser::at_typed_literal() const {
  const Token& t = peek();
  if (!(is_number(t) || (t.is(Tok::ident) && is_literal_word(t.text)))) return false;
  if (!peek(1).is(Tok::colon) || !peek(2).is(Tok::ident) || !peek(3).is(Tok::lbracket))
    return false;
  // JAX may name a variable `inf`; a literal stays on the line of what precedes it.
  if (t.is(Tok::ident) && (t.text == "inf" || t.text == "nan") && prev().line != t.line)
    return false;
  return parse_dtype(peek(2).text).has_value();
}

Literal Parser::literal_value(const Token& v, DType d) const {
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
  if (is_complex(d)) {
    if (v.is(Tok::complex) || v.is_ident("infj") || v.is_ident("nanj")) {
      auto [re, im] = complex_of(v);
      return Literal::of_complex(d, re, im);
    }
  } else if (v.is(Tok::complex) || v.is_ident("infj") || v.is_ident("nanj")) {
    bad("a real number");
  }
  if (v.is(Tok::integer) || v.is(Tok::real)) return Literal::of(d, real_of(v));
  if (v.is_ident("inf")) return Literal::of(d, INFINITY);
  if (v.is_ident("nan")) return Literal::of(d, NAN);
  bad("a number");
  return {};
}

Literal Parser::parse_typed_literal() {
  const Token& v = next();
  next();  // :
  ArrayType t = parse_array_type();
  if (!t.is_scalar())
    fail(v, fmt::format("literal {} has type {}; literals are scalars such as 2.0:f32[]",
                        text::describe(v), t.str()));
  return literal_value(v, t.dtype);
}

bool Parser::at_float0_literal() const {
  if (!peek().is(Tok::lparen)) return false;
  size_t k = 1;
  for (int depth = 1; depth > 0; ++k) {
    const Token& t = peek(k);
    if (t.is(Tok::end) || t.line != peek().line) return false;
    if (t.is(Tok::lparen)) ++depth;
    if (t.is(Tok::rparen)) --depth;
  }
  return peek(k).is(Tok::colon) && peek(k + 1).is_ident("float0") && peek(k + 2).is(Tok::lbracket);
}

Literal Parser::parse_float0_literal() {
  while (!next().is(Tok::colon)) {
  }
  ArrayType t = parse_array_type();
  if (!t.is_scalar()) fail(prev(), "a float0 literal must be a scalar, float0[]");
  return Literal::of_bool(false);
}

Literal Parser::bare_literal(const Token& v, std::optional<DType> hint) const {
  DType d;
  if (v.is_ident("True") || v.is_ident("False")) {
    d = DType::bool_;
  } else if (v.is(Tok::integer)) {
    d = hint && !is_bool(*hint) ? *hint : DType::i32;
  } else if (v.is(Tok::complex)) {
    d = hint && is_complex(*hint) ? *hint : DType::c64;
  } else {
    d = hint && is_inexact(*hint) ? *hint : DType::f32;
  }
  return literal_value(v, d);
}

Var Parser::lookup(Scope& s, const Token& t) const {
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

Atom Parser::parse_value_atom(Scope& s, std::optional<DType> hint, std::string_view what) {
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

}  // namespace refjit::text::parser

namespace refjit::text {

Jaxpr parse_text(std::string_view source, const std::string& filename,
                 const ForeignRewrites* foreign, const NamedJaxprs* known) {
  Jaxpr j = parser::Parser(source, filename, foreign, known).parse();
  verify(j);
  return j;
}

}  // namespace refjit::text
