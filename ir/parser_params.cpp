// The jaxpr parser (parser.h): params and their values.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <span>
#include <utility>

#include "ir/parser.h"

namespace refjit::text::parser {

void Parser::parse_param_list(
    Params& params, int depth, const std::function<bool(std::string_view)>& ignored,
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

void Parser::parse_params_with(std::string_view prim, const std::vector<text::ParamSpec>& specs,
                               const std::vector<std::string_view>& ignored, Params& params,
                               int depth) {
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

void Parser::parse_params(Prim prim, Params& params, int depth) {
  parse_param_list(
      params, depth, [&](std::string_view n) { return text::is_ignored_param(prim, n); },
      [&](std::string_view n) -> const text::ParamSpec* {
        const text::ParamSpec* spec = text::find_param_spec(prim, n);
        return spec && spec->kind != ParamKind::indexer ? spec : nullptr;
      },
      [&](const Token& nt) { return unknown_param_message(prim, nt); });
  // JAX writes kind=None for a plain ref; refjit's plain new_ref has no kind param.
  if (prim == Prim::new_ref && params.has("kind")) {
    const std::string* kind = std::get_if<std::string>(params.find("kind"));
    if (kind && parse_ref_kind(*kind) == RefKind::plain) params.erase("kind");
  }
}

std::string Parser::unknown_param_message(Prim prim, const Token& nt) const {
  std::vector<std::string> names;
  for (const auto& sp : text::param_specs(prim))
    if (sp.kind != ParamKind::indexer) names.push_back(std::string(sp.name));
  if (names.empty())
    return fmt::format("primitive '{}' takes no params, found {}", prim_name(prim),
                       text::describe(nt));
  return fmt::format("primitive '{}' has no param {} (its params: {})", prim_name(prim),
                     text::describe(nt), fmt::join(names, ", "));
}

void Parser::skip_value() {
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

std::string Parser::read_word() {
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

Value Parser::parse_value(int depth) {
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
  if (t.is_ident("let") && peek(1).is(Tok::ident) && peek(2).is(Tok::equal))
    return jaxpr_with_own_lets(depth);
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
        fail(peek(), fmt::format("expected ',' or '{}', found {}", close == Tok::rparen ? ")" : "]",
                                 text::describe(peek())));
      }
    }
    next();
    return v;
  }
  if (t.is(Tok::other) && t.text == "<" && peek(1).is_ident("class") && peek(2).is(Tok::string) &&
      peek(3).is(Tok::other) && peek(3).text == ">") {
    // A Python class as JAX prints it, `<class 'jax.numpy.float32'>` (mul's out_dtype): its
    // name, the word `float32`.
    std::string_view quoted = peek(2).text;
    std::string_view name = quoted.substr(1, quoted.size() >= 2 ? quoted.size() - 2 : 0);
    if (size_t dot = name.rfind('.'); dot != std::string_view::npos) name = name.substr(dot + 1);
    for (int k = 0; k < 4; ++k) next();
    v.kind = Value::Kind::word;
    v.word = std::string(name);
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
    while (peek().is(Tok::dot) && peek(1).is(Tok::ident) && peek().offset == prev().end_offset()) {
      next();
      v.word += "." + std::string(next().text);
    }
    if (peek().is(Tok::lparen) && peek().offset == prev().end_offset()) {
      if (v.word.starts_with("np.") || v.word.starts_with("numpy.")) return numpy_scalar(v, depth);
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

Value Parser::jaxpr_with_own_lets(int depth) {
  // The definitions belong to this value alone (JAX prints a jaxpr inside a Python object's
  // repr, custom_linear_solve's transpose_solve, as a program of its own): they may reuse a
  // name the enclosing program defines differently.
  Value v;
  v.tok = &peek();
  auto saved_at = std::exchange(shared_at_, {});
  auto saved = std::exchange(shared_, {});
  auto saved_parsing = std::exchange(parsing_shared_, {});
  parse_shared_jaxprs();
  v.kind = Value::Kind::jaxpr;
  v.jaxpr = std::make_shared<const Jaxpr>(parse_jaxpr(depth + 1));
  if (!pending_underscores_.positions.empty())
    underscore_outputs_[v.jaxpr.get()] = std::move(pending_underscores_);
  shared_at_ = std::move(saved_at);
  shared_ = std::move(saved);
  parsing_shared_ = std::move(saved_parsing);
  return v;
}

Value Parser::numpy_scalar(const Value& ctor, int depth) {
  next();  // (
  Value inner = parse_value(depth + 1);
  if (inner.kind != Value::Kind::integer && inner.kind != Value::Kind::real &&
      inner.kind != Value::Kind::boolean)
    fail(*ctor.tok, fmt::format("expected a number inside {}(...)", ctor.word));
  expect(Tok::rparen, fmt::format("')' to close {}(...)", ctor.word));
  inner.tok = ctor.tok;
  return inner;
}

Value Parser::record(Value v, int depth) {
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
      fail(peek(),
           fmt::format("expected ',' or ')' in {}(...), found {}", v.word, text::describe(peek())));
    }
  }
  next();
  return v;
}

[[noreturn]] void Parser::unknown_shared(const text::ParamSpec& spec, const Value& v) const {
  fail(*v.tok, fmt::format("param '{}' names the jaxpr '{}', but no 'let {} = {{ lambda ... }} "
                           "in' before the program defines it",
                           spec.name, v.word, v.word));
}

[[noreturn]] void Parser::bad_value(const text::ParamSpec& spec, const Value& v) const {
  fail(*v.tok, fmt::format("param '{}' expects {}", spec.name, kind_text(spec.kind)));
}

size_t Parser::field_index(const Value& record, const Value& item,
                           std::span<const std::string_view> fields) const {
  auto it = std::find(fields.begin(), fields.end(), item.field);
  if (it == fields.end())
    fail(*item.tok, fmt::format("{}(...) has no field '{}' (its fields: {})", record.word,
                                item.field, fmt::join(fields, ", ")));
  return static_cast<size_t>(it - fields.begin());
}

IntList Parser::ints_of(const text::ParamSpec& spec, const Value& v) const {
  if (v.kind != Value::Kind::tuple && v.kind != Value::Kind::list) bad_value(spec, v);
  IntList out;
  for (const Value& x : v.items) {
    if (x.kind != Value::Kind::integer) bad_value(spec, x);
    out.push_back(x.i);
  }
  return out;
}

ParamValue Parser::parse_param(const text::ParamSpec& spec, int depth) {
  if (spec.kind == ParamKind::name) return read_word();
  if (spec.kind == ParamKind::raw_text) {
    const Token& first = peek();
    skip_value();
    const Token& last = prev();
    if (&last < &first) fail(first, fmt::format("param '{}' has no value", spec.name));
    return std::string(first.text.data(), last.end_offset() - first.offset);
  }
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
    case ParamKind::precision: {
      // CPU code computes every product at full precision of its accumulation type, as
      // JAX's CPU backend does: the value is kept for printing only.
      if (none) return NoneParam{};
      if (v.kind == Value::Kind::word) return v.word;
      if (v.kind != Value::Kind::tuple || v.items.size() != 2) bad_value(spec, v);
      for (const Value& x : v.items)
        if (x.kind != Value::Kind::word && x.kind != Value::Kind::none) bad_value(spec, x);
      auto text = [](const Value& x) { return x.kind == Value::Kind::none ? "None" : x.word; };
      return fmt::format("({}, {})", text(v.items[0]), text(v.items[1]));
    }
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
    case ParamKind::scatter_dims:
    case ParamKind::conv_dims: {
      std::span<const std::string_view> fields =
          spec.kind == ParamKind::gather_dims
              ? std::span<const std::string_view>(text::kGatherDimsFields)
          : spec.kind == ParamKind::scatter_dims
              ? std::span<const std::string_view>(text::kScatterDimsFields)
              : std::span<const std::string_view>(text::kConvDimsFields);
      if (v.kind != Value::Kind::record) bad_value(spec, v);
      IntListList out(fields.size());
      std::vector<bool> seen(fields.size());
      for (const Value& item : v.items) {
        const size_t k = field_index(v, item, fields);
        out[k] = ints_of(spec, item);
        seen[k] = true;
      }
      for (size_t k = 0; k < fields.size(); ++k)
        if (!seen[k] && k < 3)  // the batching dims are optional (older JAX lacks them)
          fail(*v.tok, fmt::format("{}(...) is missing its field '{}'", v.word, fields[k]));
      return out;
    }
    case ParamKind::linear_solve_jaxprs:
    case ParamKind::linear_solve_counts: {
      if (v.kind != Value::Kind::record) bad_value(spec, v);
      constexpr std::span<const std::string_view> fields(text::kLinearSolveFields);
      JaxprList jaxprs(fields.size());
      IntList counts(fields.size(), 0);
      for (const Value& item : v.items) {
        const size_t k = field_index(v, item, fields);
        if (spec.kind == ParamKind::linear_solve_counts) {
          if (item.kind != Value::Kind::integer) bad_value(spec, item);
          counts[k] = item.i;
        } else if (item.kind == Value::Kind::jaxpr) {
          jaxprs[k] = item.jaxpr;
        } else if (item.kind == Value::Kind::word) {
          unknown_shared(spec, item);
        } else if (item.kind != Value::Kind::none) {
          bad_value(spec, item);
        }
      }
      if (spec.kind == ParamKind::linear_solve_counts) return counts;
      return jaxprs;
    }
    case ParamKind::name:
    case ParamKind::raw_text:
    case ParamKind::indexer: break;
  }
  bad_value(spec, v);
}

}  // namespace refjit::text::parser
