// The jaxpr parser (parser.h): ref equations and the indexers of the places they address.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "ir/parser.h"

namespace refjit::text::parser {

void Parser::parse_get(Scope& s, std::vector<Binder> outs) {
  const Token& arrow = next();
  if (outs.size() != 1)
    fail(arrow, fmt::format("a ref read binds exactly one value, found {} binders", outs.size()));
  Place p = parse_place(s);
  std::vector<Atom> ins{p.ref};
  ins.insert(ins.end(), p.dynamic.begin(), p.dynamic.end());
  emit(s, *p.tok, Prim::get, std::move(ins), Params{{"indexer", p.indexer}}, outs);
}

void Parser::parse_swap(Scope& s, std::vector<Binder> outs) {
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

void Parser::parse_ref_write(Scope& s) {
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

void Parser::emit_write(Scope& s, const Place& p, Prim prim, Atom value,
                        const std::vector<Binder>& outs) {
  std::vector<Atom> ins{p.ref, std::move(value)};
  ins.insert(ins.end(), p.dynamic.begin(), p.dynamic.end());
  emit(s, *p.tok, prim, std::move(ins), Params{{"indexer", p.indexer}}, outs, true);
}

DType Parser::ref_dtype(Scope& s, const Place& p) const {
  return s.builder.jaxpr().type_of(p.ref).dtype();
}

std::string Parser::place_text(const Place& p) const {
  return std::string(p.tok->text.data(), p.end - p.tok->offset);
}

Place Parser::parse_place(Scope& s) {
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

std::optional<Atom> Parser::parse_index_operand(Scope& s) {
  if (at_typed_literal()) return Atom(parse_typed_literal());
  if (peek().is(Tok::ident)) return Atom(lookup(s, next()));
  return std::nullopt;
}

void Parser::parse_index_dim(Scope& s, int64_t dim, Place& p) {
  IndexerDim d;
  const Token& first = peek();
  if (first.is(Tok::colon)) {
    next();
    static_slice(0, dim, d);
  } else if (first.is(Tok::integer) && !at_typed_literal()) {
    if (peek(1).is(Tok::colon)) {
      int64_t start = expect_nonneg_int("a slice start");
      next();
      static_slice(start, dim, d);
    } else {
      // JAX keeps a negative static index as written (`r[-1]`): it counts from the end.
      // One outside the dimension is left for the ref checks to report (E12).
      int64_t index = integer_of(next());
      d.kind = IndexerDim::Kind::index;
      d.start = index < 0 && index >= -dim ? index + dim : index;
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

int64_t Parser::expect_stride() {
  const Token& t = peek();
  int64_t v = expect_nonneg_int("a slice stride");
  if (v == 0) fail(t, "a slice stride must be at least 1");
  return v;
}

void Parser::static_slice(int64_t start, int64_t dim, IndexerDim& d) {
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

}  // namespace refjit::text::parser
