// The jaxpr parser (parser.h): equations, generic ones and JAX's forms (rewrites, key types,
// `_` outputs, implicit size-1 broadcasting).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "ir/parser.h"

namespace refjit::text::parser {

namespace {

// Edit distance, for the "did you mean" of a misspelt primitive.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Names the primitive, says where the list of readable ones is for both kinds of user (the
// Python package's refjit.primitives(), the CLI's docs), and suggests a near name.
std::string unknown_primitive_message(std::string_view name, const ForeignRewrites* foreign) {
  const std::vector<std::string> known = primitive_names(foreign);
  std::string nearest;  // at most one edit per three letters (no 'or' for 'qr')
  size_t best = name.size() / 3 + 1;
  for (const std::string& k : known)
    if (size_t d = edit_distance(name, k); d < best) best = d, nearest = k;
  std::string hint = nearest.empty() ? "" : fmt::format("; did you mean '{}'?", nearest);
  return fmt::format(
      "unknown primitive '{}': refjit does not read it{} (refjit.primitives() "
      "in Python and docs/primitives.md list the {} it reads)",
      name, hint, known.size());
}

}  // namespace

bool Parser::ref_write_follows() const {
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

void Parser::parse_eqn(Scope& s, int depth) {
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

void Parser::parse_generic(Scope& s, std::vector<Binder> outs, int depth) {
  const Token& pt = peek();
  if (!pt.is(Tok::ident))
    fail(pt, fmt::format("expected a primitive name, found {}", text::describe(pt)));
  std::optional<Prim> prim = prim_from_name(pt.text);
  if (const ForeignRewrite* rw = foreign_ ? foreign_->find(pt.text) : nullptr;
      rw && (!prim || foreign_form_follows(*rw, *prim))) {
    next();
    parse_rewrite(s, pt, *rw, std::move(outs), depth);
    return;
  }
  if (!prim) fail(pt, unknown_primitive_message(pt.text, foreign_));
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
  if ((*prim == Prim::reduce_max || *prim == Prim::reduce_min) && atoms.size() == 1 &&
      is_complex(s.builder.type_of(atoms[0]).array.dtype)) {
    // refjit's reductions take real numbers; the foreign system orders complex ones.
    if (!foreign_ || !foreign_->complex_extremum)
      fail(pt, fmt::format("{} of a complex operand: refjit's reductions take real numbers",
                           prim_name(*prim)));
    const bool max = *prim == Prim::reduce_max;
    expand_and_bind(
        s, pt, prim_name(*prim),
        [this, max](RewriteArgs& a) { return foreign_->complex_extremum(a, max); },
        std::move(atoms), params, std::move(outs));
    return;
  }
  if (*prim == Prim::broadcast_in_dim) fill_hidden_broadcast_params(s, params, atoms, outs);
  if (is_broadcasting_binary(*prim)) broadcast_size1_dims(s, atoms);
  convert_mixed_operands(s, *prim, atoms, params);
  if (!atoms.empty() && is_var(atoms[0]) && s.keys.count(as_var(atoms[0]).id))
    adapt_to_key_layout(pt, *prim, params);
  emit(s, pt, *prim, std::move(atoms), std::move(params), outs);
}

void Parser::adapt_to_key_layout(const Token& at, Prim prim, Params& params) {
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
    case Prim::copy:
    case Prim::checkpoint_name: return;
    default:
      fail(at, fmt::format("'{}' on a PRNG key array is not supported; refjit reads slice, "
                           "squeeze, expand_dims, reshape, broadcast_in_dim and concatenate "
                           "of keys",
                           prim_name(prim)));
  }
}

void Parser::retype_underscore_outputs(Params& params, const std::vector<Binder>& outs) {
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

bool Parser::foreign_form_follows(const ForeignRewrite& rw, Prim native) const {
  if (!peek(1).is(Tok::lbracket)) return false;
  // The names of the bracket's params: identifiers followed by '=' at its own depth.
  std::vector<std::string_view> names;
  int depth = 0;
  for (size_t k = 1;; ++k) {
    const Token& t = peek(k);
    if (t.is(Tok::end)) break;
    if (t.is(Tok::lbracket) || t.is(Tok::lparen) || t.is(Tok::lbrace)) ++depth;
    if (t.is(Tok::rbracket) || t.is(Tok::rparen) || t.is(Tok::rbrace)) {
      if (--depth == 0) break;
    }
    if (depth == 1 && t.is(Tok::ident) && peek(k + 1).is(Tok::equal)) names.push_back(t.text);
  }
  // JAX's form: every param is one the rewrite reads or ignores, and either one of them is not
  // a param of refjit's primitive of the same name, or all the rewrite reads are there.
  // all_gather[axis_name axis_size] is refjit's own; all_gather[all_gather_dimension ...] and
  // reshape[dimensions new_sizes sharding] are JAX's.
  bool any_foreign = false;
  for (std::string_view name : names) {
    if (name == "sharding" || name == "out_sharding") continue;  // either form may print them
    bool known = std::any_of(rw.params.begin(), rw.params.end(),
                             [&](const auto& spec) { return spec.name == name; }) ||
                 std::find(rw.ignored.begin(), rw.ignored.end(), name) != rw.ignored.end();
    if (!known) return false;
    any_foreign = any_foreign || !text::find_param_spec(native, name);
  }
  return any_foreign || std::all_of(rw.params.begin(), rw.params.end(), [&](const auto& spec) {
           return std::find(names.begin(), names.end(), spec.name) != names.end();
         });
}

void Parser::parse_rewrite(Scope& s, const Token& at, const ForeignRewrite& rw,
                           std::vector<Binder> outs, int depth) {
  Params params;
  if (peek().is(Tok::lbracket)) parse_params_with(rw.name, rw.params, rw.ignored, params, depth);
  std::vector<Atom> atoms = parse_operands(s);
  expand_and_bind(s, at, rw.name, rw.expand, std::move(atoms), params, std::move(outs));
}

void Parser::expand_and_bind(Scope& s, const Token& at, std::string_view name,
                             const std::function<std::vector<Atom>(text::RewriteArgs&)>& expand,
                             std::vector<Atom> atoms, const Params& params,
                             std::vector<Binder> outs) {
  std::vector<Type> out_types;
  for (const Binder& b : outs) out_types.push_back(b.type);
  text::RewriteArgs args{s.builder, std::move(atoms), params, out_types};
  std::vector<Atom> results;
  try {
    results = expand(args);
  } catch (const RefError& e) {
    throw RefError(e.code(), loc(at) + "error: " + e.what());
  } catch (const TypeError& e) {
    throw TypeError(loc(at) + "error: " + e.what());
  }
  if (results.size() != outs.size())
    throw TypeError(loc(at) + fmt::format("error: {} produces {} value(s) but {} binder(s) are "
                                          "written",
                                          name, results.size(), outs.size()));
  for (size_t k = 0; k < outs.size(); ++k) {
    const Binder& b = outs[k];
    Type t = s.builder.type_of(results[k]);
    if (!(t == b.type))
      throw TypeError(loc(*b.tok) + fmt::format("error: binder '{}' is written {} but {} "
                                                "produces {}",
                                                b.name, b.type.str(), name, t.str()));
    Var v = is_var(results[k]) ? as_var(results[k]) : s.builder.add_eqn1(Prim::copy, {results[k]});
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

std::vector<Atom> Parser::parse_operands(Scope& s) {
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
    if (at_float0_literal()) {
      toks.push_back(&t);
      ins.push_back(parse_float0_literal());
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
        (prim_from_name(t.text) || (foreign_ && foreign_->find(t.text))))
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

void Parser::broadcast_size1_dims(Scope& s, std::vector<Atom>& atoms) {
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

void Parser::convert_mixed_operands(Scope& s, Prim prim, std::vector<Atom>& atoms,
                                    const Params& params) {
  const Jaxpr& j = s.builder.jaxpr();
  auto convert = [&](Atom& a, DType to) {
    if (j.type_of(a).is_ref || j.type_of(a).dtype() == to) return;
    a = s.builder.add_eqn1(Prim::convert_element_type, {a},
                           Params{{"new_dtype", to}, {"weak_type", false}});
  };
  if (prim == Prim::dot_general && atoms.size() == 2) {
    const DType d0 = j.type_of(atoms[0]).dtype(), d1 = j.type_of(atoms[1]).dtype();
    const ParamValue* pref = params.find("preferred_element_type");
    const DType* to = pref ? std::get_if<DType>(pref) : nullptr;
    if ((d0 != d1 || d0 == DType::bool_) && to && *to != DType::bool_)
      for (Atom& a : atoms) convert(a, *to);
  } else if (prim == Prim::argmax && !atoms.empty() &&
             j.type_of(atoms[0]).dtype() == DType::bool_) {
    convert(atoms[0], DType::i32);
  }
}

bool Parser::is_broadcasting_binary(Prim p) {
  switch (p) {
    case Prim::add:
    case Prim::add_any:
    case Prim::sub:
    case Prim::mul:
    case Prim::div:
    case Prim::max:
    case Prim::min:
    case Prim::pow:
    case Prim::complex:
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
    case Prim::polygamma:
    case Prim::igamma:
    case Prim::igammac:
    case Prim::igamma_grad_a:
    case Prim::shift_left:
    case Prim::shift_right_logical:
    case Prim::shift_right_arithmetic: return true;
    default: return false;
  }
}

void Parser::fill_hidden_broadcast_params(Scope& s, Params& params, const std::vector<Atom>& ins,
                                          const std::vector<Binder>& outs) {
  if (outs.size() != 1) return;
  const Shape& out = outs[0].type.shape();
  if (!params.has("shape")) params.set("shape", IntList(out.begin(), out.end()));
  if (!params.has("broadcast_dimensions") && ins.size() == 1) {
    int64_t rank = s.builder.jaxpr().type_of(ins[0]).array.rank();
    IntList dims;
    for (int64_t k = static_cast<int64_t>(out.size()) - rank; k < static_cast<int64_t>(out.size());
         ++k)
      if (k >= 0) dims.push_back(k);
    params.set("broadcast_dimensions", std::move(dims));
  }
}

void Parser::emit(Scope& s, const Token& at, Prim prim, std::vector<Atom> ins, Params params,
                  const std::vector<Binder>& outs, bool ref_form) {
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
    // A ref's kind is not written in its type (JAX prints Ref{f32[]}): it comes from the rule.
    Type t = ref_form && b.dropped ? inferred[k] : b.type;
    if (t.is_ref && t.ref_kind == RefKind::plain) t.ref_kind = inferred[k].ref_kind;
    vars.push_back(j.new_var(std::move(t), b.dropped, b.dropped ? "" : b.name));
  }
  s.builder.add_eqn_with_outs(prim, std::move(ins), std::move(params), vars);
  for (size_t k = 0; k < outs.size(); ++k) declare(s, outs[k], vars[k]);
}

}  // namespace refjit::text::parser

namespace refjit::text {

std::vector<std::string> primitive_names(const ForeignRewrites* foreign) {
  std::vector<std::string> names;
  for (int i = 0; i < kNumPrims; ++i) names.emplace_back(prim_name(static_cast<Prim>(i)));
  if (foreign)
    for (std::string_view n : foreign->names()) names.emplace_back(n);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace refjit::text
