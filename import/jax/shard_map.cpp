// JAX's shard_map as it prints it:
//   shard_map[jaxpr={...} mesh=Mesh('data': 2, axis_types=(Auto,)) in_specs=(P(), P('data',))
//             out_specs=(P(),) check_vma=True ...] x...
// read as the program one member of the mesh runs (docs/distributed.md "From Python"). Each mesh
// axis names the processes it is bound to (refjit.distributed.bind_axis, or every process of
// the job), and must span as many processes as the mesh says. An operand split along an axis
// (`P('data')`) gives this member its block; a result split along one is every member's block,
// concatenated. The body runs once, as a jit; its pvary and psum_invariant eqns carry JAX's
// check_vma derivative rules (primitives.def), so gradients match JAX's on a mesh of devices.
#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "import/jax/rewrite_support.h"
#include "ir/sub_jaxprs.h"

namespace refjit::text {

namespace {

constexpr std::string_view kPrim = "shard_map";

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

// JAX prints the mesh as `Mesh('x': 2, 'y': 1, axis_types=(...))` (or AbstractMesh(...)).
std::vector<MeshAxis> mesh_axes(const std::string& mesh) {
  std::vector<MeshAxis> axes;
  for (size_t at = mesh.find("': "); at != std::string::npos; at = mesh.find("': ", at + 3)) {
    const size_t open = mesh.rfind('\'', at - 1);
    size_t end = at + 3;
    while (end < mesh.size() && std::isdigit(static_cast<unsigned char>(mesh[end]))) ++end;
    if (open == std::string::npos || end == at + 3)
      fail(kPrim, fmt::format("cannot read the mesh {}", mesh));
    axes.push_back(
        {mesh.substr(open + 1, at - open - 1), std::stoll(mesh.substr(at + 3, end - at - 3))});
  }
  if (axes.empty()) fail(kPrim, fmt::format("no axes in the mesh {}", mesh));
  return axes;
}

// One PartitionSpec: per dim of the array, the mesh axes it is split over (empty: whole).
using Spec = std::vector<std::vector<std::string>>;

// The names in `text` (`'data'`, `('data', 'model')`, `None`).
std::vector<std::string> quoted_names(std::string_view text) {
  std::vector<std::string> names;
  for (size_t k = text.find('\''); k != std::string_view::npos; k = text.find('\'', k + 1)) {
    const size_t end = text.find('\'', k + 1);
    if (end == std::string_view::npos) break;
    names.emplace_back(text.substr(k + 1, end - k - 1));
    k = end;
  }
  return names;
}

// `(P(), P('data', None), ...)`: one Spec per P(...).
std::vector<Spec> partition_specs(std::string_view param, const std::string& text) {
  std::vector<Spec> specs;
  for (size_t at = text.find("P("); at != std::string::npos; at = text.find("P(", at)) {
    size_t k = at + 2;
    int depth = 1;
    Spec spec;
    size_t item = k;
    for (; k < text.size() && depth > 0; ++k) {
      const char c = text[k];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if ((c == ',' && depth == 1) || depth == 0) {
        const std::string_view entry = std::string_view(text).substr(item, k - item);
        if (entry.find('=') != std::string_view::npos)
          fail(kPrim, fmt::format("{} {}: refjit reads partition specs of mesh axes and None, "
                                  "not {}",
                                  param, text, entry));
        if (entry.find_first_not_of(" ") != std::string_view::npos)
          spec.push_back(quoted_names(entry));
        item = k + 1;
      }
    }
    specs.push_back(std::move(spec));
    at = k;
  }
  return specs;
}

const MeshAxis& axis_named(const std::vector<MeshAxis>& mesh, const std::string& name) {
  for (const MeshAxis& a : mesh)
    if (a.name == name) return a;
  fail(kPrim, fmt::format("the partition spec names '{}', which is not an axis of the mesh", name));
}

Params axis_params(const MeshAxis& a) { return Params{{"axis_name", a.name}}; }

// The axis a dim is split over, or null when it is whole (unsplit, or split over size-1 axes).
const MeshAxis* split_axis(const std::vector<MeshAxis>& mesh,
                           const std::vector<std::string>& names) {
  const MeshAxis* split = nullptr;
  for (const std::string& n : names) {
    const MeshAxis& a = axis_named(mesh, n);
    if (a.size == 1) continue;
    if (split)
      fail(kPrim, fmt::format("a dim split over both '{}' and '{}' is not supported; split each "
                              "dim over one mesh axis",
                              split->name, a.name));
    split = &a;
  }
  return split;
}

// Whether `j` (or a body inside it) runs a collective over `axis`.
bool uses_axis(const Jaxpr& j, const std::string& axis) {
  for (const Eqn& e : j.eqns) {
    if (prim_info(e.prim).communicates || e.prim == Prim::pvary) {
      const ParamValue* name = e.params.find("axis_name");
      if (name && std::get<std::string>(*name) == axis) return true;
    }
    if (any_sub_jaxpr(e, [&](const Jaxpr& body) { return uses_axis(body, axis); })) return true;
  }
  return false;
}

std::vector<Atom> shard_map(RewriteArgs& a) {
  const std::vector<MeshAxis> mesh = mesh_axes(a.params.get<std::string>("mesh"));
  const JaxprPtr& body = a.params.get<JaxprPtr>("jaxpr");
  if (!body) fail(kPrim, "jaxpr is None");
  if (!body->constvars.empty()) fail(kPrim, "a jaxpr with constvars cannot be called");
  const std::string in_text = a.params.get_or<std::string>("in_specs", "");
  const std::string out_text = a.params.get_or<std::string>("out_specs", "");
  const std::vector<Spec> in_specs = partition_specs("in_specs", in_text);
  const std::vector<Spec> out_specs = partition_specs("out_specs", out_text);
  bool split = false;
  for (const MeshAxis& m : mesh) split = split || m.size > 1;
  if (split && a.params.get_or<std::string>("check_vma", "True") != "True")
    fail(kPrim,
         "check_vma=False on a mesh of several members is not supported: without it the "
         "printed body does not say which values differ between members, which the "
         "derivative needs; use JAX's default check_vma=True");
  if (split && (in_specs.size() != a.ins.size() || out_specs.size() != body->outvars.size()))
    fail(kPrim, fmt::format("{} operands and {} results, but in_specs={} and out_specs={}",
                            a.ins.size(), body->outvars.size(), in_text, out_text));
  Emit e{a.b};
  // The mesh is a requirement on the processes: every axis that splits an operand or a result,
  // or that the body communicates over, must span that many (checked when the program runs).
  // An axis that does neither changes nothing: every member would compute the same.
  auto splits = [&](const std::vector<Spec>& specs, const MeshAxis& m) {
    for (const Spec& spec : specs)
      for (const std::vector<std::string>& dim : spec)
        if (split_axis(mesh, dim) == &m) return true;
    return false;
  };
  for (const MeshAxis& m : mesh)
    if (uses_axis(*body, m.name) || (split && (splits(in_specs, m) || splits(out_specs, m))))
      e.op(Prim::axis_index, {}, Params{{"axis_name", m.name}, {"axis_size", m.size}});
  // Operands: this member's block along every split dim. pvary first, so that the transpose
  // sums the members' block cotangents into the whole array's.
  std::vector<Atom> ins = a.ins;
  for (size_t k = 0; split && k < ins.size(); ++k) {
    if (a.b.type_of(ins[k]).is_ref)
      fail(kPrim, fmt::format("operand {} is a ref; refs are passed to a shard_map only on a mesh "
                              "whose axes all have one member",
                              k));
    const Spec& spec = in_specs[k];
    for (size_t d = 0; d < spec.size(); ++d) {
      const MeshAxis* axis = split_axis(mesh, spec[d]);
      if (!axis) continue;
      const ArrayType t = e.type(ins[k]);
      if (d >= t.shape.size() || t.shape[d] % axis->size != 0)
        fail(kPrim, fmt::format("operand {} ({}) cannot be split in {} along dim {}", k, t.str(),
                                axis->size, d));
      const int64_t block = t.shape[d] / axis->size;
      const Atom varying = e.op(Prim::pvary, {ins[k]}, axis_params(*axis));
      const Atom start = e.op(Prim::mul, {e.op(Prim::axis_index, {}, axis_params(*axis)),
                                          e.scalar(DType::i32, static_cast<double>(block))});
      std::vector<Atom> slice_ins{varying};
      IntList sizes(t.shape.begin(), t.shape.end());
      sizes[d] = block;
      for (size_t i = 0; i < t.shape.size(); ++i)
        slice_ins.push_back(i == d ? start : e.scalar(DType::i32, 0));
      ins[k] = e.op(Prim::dynamic_slice, slice_ins, Params{{"slice_sizes", sizes}});
    }
  }
  std::vector<Var> body_outs =
      a.b.add_eqn(Prim::jit, ins, Params{{"jaxpr", body}, {"name", std::string(kPrim)}});
  std::vector<Atom> outs(body_outs.begin(), body_outs.end());
  // Results split along an axis: every member's block, in rank order, along the dim.
  for (size_t k = 0; split && k < outs.size(); ++k) {
    const Spec& spec = out_specs[k];
    for (size_t d = spec.size(); d-- > 0;) {
      const MeshAxis* axis = split_axis(mesh, spec[d]);
      if (!axis) continue;
      const ArrayType t = e.type(outs[k]);
      if (d >= t.shape.size())
        fail(kPrim,
             fmt::format("out_specs {} splits dim {} of result {} ({})", out_text, d, k, t.str()));
      Atom g = e.op(Prim::all_gather_invariant, {outs[k]},
                    Params{{"axis_name", axis->name}, {"axis_size", axis->size}});
      IntList perm;
      for (size_t i = 1; i <= d; ++i) perm.push_back(static_cast<int64_t>(i));
      perm.push_back(0);
      for (size_t i = d + 1; i <= t.shape.size(); ++i) perm.push_back(static_cast<int64_t>(i));
      g = e.transpose(g, perm);
      Shape whole = t.shape;
      whole[d] *= axis->size;
      outs[k] = e.reshape(g, whole);
    }
  }
  return outs;
}

// pvary[axes=('data',)] x and psum_invariant[axes=('data',)] x: one refjit eqn per axis.
std::vector<Atom> per_axis(RewriteArgs& a, Prim p) {
  const std::string text = a.params.get<std::string>("axes");
  const std::vector<std::string> axes = quoted_names(text);
  if (axes.empty())
    fail(prim_name(p), fmt::format("no axis name in {} (refjit reduces over named axes)", text));
  Emit e{a.b};
  std::vector<Atom> outs;
  for (Atom x : a.ins) {
    for (const std::string& axis : axes) x = e.op(p, {x}, Params{{"axis_name", axis}});
    outs.push_back(x);
  }
  return outs;
}

}  // namespace

void add_shard_map_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({"shard_map",
                   {{"jaxpr", K::jaxpr},
                    {"mesh", K::raw_text},
                    {"in_specs", K::raw_text},
                    {"out_specs", K::raw_text},
                    {"check_vma", K::raw_text}},
                   {"newly_manual_axes", "manual_axes", "auto", "check_rep", "rewrite"},
                   shard_map});
  table.push_back({"pvary", {{"axes", K::raw_text}}, {}, [](RewriteArgs& a) {
                     return per_axis(a, Prim::pvary);
                   }});
  table.push_back(
      {"psum_invariant", {{"axes", K::raw_text}}, {"axis_index_groups"}, [](RewriteArgs& a) {
         return per_axis(a, Prim::psum_invariant);
       }});
}

}  // namespace refjit::text
