// JAX's collectives as it prints them (`psum[axes=('i',) axis_index_groups=None]`,
// `all_gather[all_gather_dimension=... axis_name=('i',) ... tiled=...]`), read
// as refjit's one-axis collectives (docs/primitives.md "Collectives").
#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "import/jax/rewrite_support.h"

namespace refjit::text {

namespace {

// The axis names of a tuple as JAX prints it, `('i',)` or `('i', 'j')` or a bare `i`. Positional
// axes (integers, from vmap) never reach a printed program; they are refused by name.
std::vector<std::string> axis_names(std::string_view prim, std::string_view text) {
  std::vector<std::string> names;
  size_t k = 0;
  while (k < text.size()) {
    char c = text[k];
    if (c == '\'' || c == '"') {
      size_t end = text.find(c, k + 1);
      if (end == std::string_view::npos) break;
      names.emplace_back(text.substr(k + 1, end - k - 1));
      k = end + 1;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = k;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
        ++end;
      names.emplace_back(text.substr(k, end - k));
      k = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      fail(prim, fmt::format("the axes {} name a positional axis; refjit reduces over named "
                             "axes only (bind a name with refjit::distributed)",
                             text));
    } else {
      ++k;
    }
  }
  if (names.empty()) fail(prim, fmt::format("no axis name in {}", text));
  return names;
}

void expect_no_groups(const RewriteArgs& a, std::string_view prim) {
  const ParamValue* g = a.params.find("axis_index_groups");
  if (g && std::get<std::string>(*g) != "None")
    fail(prim,
         "axis_index_groups is not supported; split the communicator instead "
         "(refjit::distributed::Communicator::split)");
}

// psum[axes] x y ...: each operand summed over every named axis in turn.
std::vector<Atom> psum(RewriteArgs& a) {
  expect_no_groups(a, "psum");
  std::vector<std::string> axes = axis_names("psum", a.params.get<std::string>("axes"));
  Emit e{a.b};
  std::vector<Atom> outs;
  for (Atom x : a.ins) {
    for (const std::string& axis : axes) x = e.op(Prim::psum, {x}, Params{{"axis_name", axis}});
    outs.push_back(x);
  }
  return outs;
}

// all_gather[all_gather_dimension=d axis_name=(n,) axis_size=s tiled=t] x: refjit's all_gather
// stacks the members' values in front; the stacked axis then moves to d (and, tiled, merges
// with the axis after it).
std::vector<Atom> all_gather(RewriteArgs& a, Prim gather) {
  const std::string_view prim = prim_name(gather);
  expect_no_groups(a, prim);
  expect_operands(a, prim, 1);
  std::vector<std::string> axes = axis_names(prim, a.params.get<std::string>("axis_name"));
  if (axes.size() != 1)
    fail(prim, fmt::format("gathering over {} axes at once is not supported; gather one axis "
                           "at a time",
                           axes.size()));
  int64_t dim = a.params.get<int64_t>("all_gather_dimension");
  int64_t size = a.params.get<int64_t>("axis_size");
  bool tiled = a.params.get_or<bool>("tiled", false);
  ArrayType x = array_of(a, prim, 0);
  int64_t rank = x.rank();
  if (dim < 0 || dim > rank || (tiled && dim == rank))
    fail(prim, fmt::format("all_gather_dimension={} is out of range for {}", dim, x.str()));
  Emit e{a.b};
  Atom g = e.op(gather, {a.ins[0]}, Params{{"axis_name", axes[0]}, {"axis_size", size}});
  if (dim != 0) {
    IntList perm;
    for (int64_t k = 1; k <= dim; ++k) perm.push_back(k);
    perm.push_back(0);
    for (int64_t k = dim + 1; k <= rank; ++k) perm.push_back(k);
    g = e.transpose(g, perm);
  }
  if (tiled) {
    Shape s = x.shape;
    s[static_cast<size_t>(dim)] *= size;
    g = e.reshape(g, s);
  }
  return {g};
}

}  // namespace

void add_collective_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({"psum", {{"axes", K::raw_text}, {"axis_index_groups", K::raw_text}}, {}, psum});
  // all_gather_invariant (JAX's lax.all_gather_invariant, and shard_map's gathers of varying
  // values into one every member shares) differs only in its transpose.
  for (Prim gather : {Prim::all_gather, Prim::all_gather_invariant})
    table.push_back({prim_name(gather),
                     {{"all_gather_dimension", K::integer},
                      {"axis_name", K::raw_text},
                      {"axis_size", K::integer},
                      {"tiled", K::boolean},
                      {"axis_index_groups", K::raw_text}},
                     {},
                     [gather](RewriteArgs& a) { return all_gather(a, gather); }});
}

}  // namespace refjit::text
