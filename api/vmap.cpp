// The non-template part of refjit/vmap.h: batch shapes, axis moves and the batched call.
#include "passes/batching/vmap.h"

#include <fmt/format.h>

#include <tuple>

#include "refjit/ir/error.h"
#include "refjit/ops.h"
#include "refjit/vmap.h"

namespace refjit::flat {

namespace {

// `axis` counted from the end when negative, as in NumPy; nullopt when out of range.
std::optional<int> normalised(int axis, int rank) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  return axis;
}

// [a0, ..., a_axis, ...] -> [a_axis, a0, ...]
Value axis_to_front(const Value& x, int axis) {
  if (axis == 0) return x;
  Ints perm{axis};
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis) perm.push_back(d);
  return transpose(x, perm);
}

// [B, rest...] -> the batch at `axis`.
Value front_to_axis(const Value& x, int axis) {
  if (axis == 0) return x;
  Ints perm;
  for (int d = 1; d <= axis; ++d) perm.push_back(d);
  perm.push_back(0);
  for (int d = axis + 1; d < x.rank(); ++d) perm.push_back(d);
  return transpose(x, perm);
}

// The batch size and each leaf's per-example type.
struct VmapShape {
  int64_t size = 0;
  std::vector<Type> per_example;
};

// The batch size and each leaf's per-example type, from the leaves and their batch axes
// (nullopt: not batched). Throws Error naming the leaf for an axis out of range, batch axes of
// different sizes, a ref batched along an axis other than 0, or no batched leaf at all.
VmapShape vmap_shape(const std::vector<Operand>& leaves,
                     const std::vector<std::optional<int>>& axes, const std::string& name) {
  VmapShape s;
  s.size = -1;
  size_t first = 0;
  for (size_t k = 0; k < leaves.size(); ++k) {
    Type t = type_of(leaves[k]);
    if (axes[k]) {
      std::optional<int> axis = normalised(*axes[k], t.array.rank());
      if (!axis)
        throw Error(
            fmt::format("{}: in_axes gives argument leaf {} ({}) the batch axis {}, "
                        "which it does not have",
                        name, k, t.long_str(), *axes[k]));
      const int64_t n = t.array.shape[static_cast<size_t>(*axis)];
      if (s.size >= 0 && n != s.size)
        throw Error(
            fmt::format("{}: the batch axes differ in size: argument leaf {} has {} "
                        "along its axis {}, argument leaf {} has {}",
                        name, first, s.size, *axes[first], k, n));
      if (s.size < 0) first = k;
      s.size = n;
      t.array.shape.erase(t.array.shape.begin() + *axis);
    }
    s.per_example.push_back(t);
  }
  if (s.size < 0)
    throw Error(fmt::format("{}: no argument is batched (every in_axes entry is nullopt)", name));
  return s;
}

// Runs the per-example function `traced` over the batch: the batched leaves' axes moved to the
// front, the jaxpr batched (passes/batching/vmap.h) and called, each output's batch dim put at its
// out axis (an output that does not depend on the batch is broadcast there; with out axis
// nullopt it must not depend on it).
std::vector<Operand> vmap_call(const TracedFunction& traced, const std::vector<Operand>& leaves,
                               const std::vector<std::optional<int>>& axes,
                               const std::vector<std::optional<int>>& out_axes,
                               const VmapShape& shape, const std::string& name) {
  std::vector<Operand> args;
  std::vector<bool> batched;
  // A ref batched along another axis than 0 runs on a ref with that axis in front (one row per
  // example, as the batched jaxpr expects), whose contents are moved back afterwards.
  std::vector<std::tuple<Ref, Ref, int>> moved_refs;  // (argument, stand-in, axis)
  for (size_t k = 0; k < leaves.size(); ++k) {
    batched.push_back(axes[k].has_value());
    const Value* v = std::get_if<Value>(&leaves[k]);
    const Ref* r = std::get_if<Ref>(&leaves[k]);
    const int axis = axes[k] ? *normalised(*axes[k], type_of(leaves[k]).array.rank()) : 0;
    if (v && axes[k]) {
      args.push_back(axis_to_front(*v, axis));
    } else if (r && axis != 0) {
      Ref front = new_ref(axis_to_front(r->get(), axis), r->kind());
      moved_refs.emplace_back(*r, front, axis);
      args.push_back(front);
    } else {
      args.push_back(leaves[k]);
    }
  }
  BatchedJaxpr b = vmap_jaxpr(*traced.jaxpr, batched, shape.size);
  const size_t nout = b.out_batched.size();
  if (out_axes.size() != 1 && out_axes.size() != nout)
    throw Error(
        fmt::format("{}: out_axes has {} entries for {} outputs (give one for all, or "
                    "one per output)",
                    name, out_axes.size(), nout));
  TracedFunction batched_fn{std::make_shared<const Jaxpr>(std::move(b.jaxpr)), traced.consts};
  std::vector<Operand> outs = bind_jaxpr(name, batched_fn, args);
  for (const auto& [ref, front, axis] : moved_refs) ref.set(front_to_axis(freeze(front), axis));
  for (size_t k = 0; k < nout; ++k) {
    const std::optional<int> out_axis = out_axes.size() == 1 ? out_axes[0] : out_axes[k];
    Value v = std::get<Value>(outs[k]);
    if (!out_axis) {
      if (b.out_batched[k])
        throw Error(
            fmt::format("{}: output {} depends on the batch, but its out_axes entry is "
                        "nullopt",
                        name, k));
      continue;
    }
    if (!b.out_batched[k]) {  // the same for every example: broadcast along the batch
      Ints shape_b{shape.size};
      Ints dims;
      for (int d = 0; d < v.rank(); ++d) {
        shape_b.push_back(v.shape()[static_cast<size_t>(d)]);
        dims.push_back(d + 1);
      }
      v = broadcast_in_dim(v, shape_b, dims);
    }
    std::optional<int> axis = normalised(*out_axis, v.rank());
    if (!axis)
      throw Error(
          fmt::format("{}: out_axes puts output {}'s batch dim at axis {}, but it has "
                      "rank {}",
                      name, k, *out_axis, v.rank()));
    outs[k] = front_to_axis(v, *axis);
  }
  return outs;
}

}  // namespace

std::vector<Operand> vmap(const TraceBody& f, const std::vector<Operand>& leaves,
                          const std::vector<std::optional<int>>& axes,
                          const std::vector<std::optional<int>>& out_axes,
                          const std::string& name) {
  VmapShape shape = vmap_shape(leaves, axes, name);
  TracedFunction traced = trace_function(f, shape.per_example, name);
  return vmap_call(traced, leaves, axes, out_axes, shape, name);
}

}  // namespace refjit::flat
