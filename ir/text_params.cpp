#include "ir/text_params.h"

#include <algorithm>
#include <array>
#include <optional>
#include <span>

namespace refjit::text {

namespace {

using K = ParamKind;
// RuleTable needs a rule type that tests true when set.
using SpecList = std::optional<std::vector<ParamSpec>>;

// One entry per primitive with params (docs/primitives.md); the rest take none.
RuleTable<SpecList> make_specs() {
  RuleTable<SpecList> t;
  auto set = [&](Prim p, std::vector<ParamSpec> specs) { t.set(p, std::move(specs)); };
  set(Prim::round, {{"rounding_method", K::integer}});
  set(Prim::checkpoint_name, {{"name", K::name}});
  set(Prim::new_ref, {{"kind", K::name}});
  set(Prim::psum, {{"axis_name", K::name}});
  set(Prim::all_gather, {{"axis_name", K::name}, {"axis_size", K::integer}});
  set(Prim::broadcast_from, {{"axis_name", K::name}, {"root", K::integer}});
  set(Prim::axis_index, {{"axis_name", K::name}, {"axis_size", K::integer}});
  set(Prim::psum_invariant, {{"axis_name", K::name}});
  set(Prim::pvary, {{"axis_name", K::name}});
  set(Prim::psum_start, {{"axis_name", K::name}});
  set(Prim::psum_wait, {{"axis_name", K::name}});
  set(Prim::all_gather_invariant, {{"axis_name", K::name}, {"axis_size", K::integer}});
  set(Prim::debug_callback, {{"callback", K::integer}});
  set(Prim::integer_pow, {{"y", K::integer}});
  set(Prim::convert_element_type, {{"new_dtype", K::dtype}, {"weak_type", K::boolean}});
  set(Prim::bitcast_convert_type, {{"new_dtype", K::dtype}});
  set(Prim::conj, {{"input_dtype", K::dtype}});
  set(Prim::broadcast_in_dim, {{"broadcast_dimensions", K::ints}, {"shape", K::ints}});
  set(Prim::reshape, {{"dimensions", K::ints_or_none}, {"new_sizes", K::ints}});
  set(Prim::squeeze, {{"dimensions", K::ints}});
  set(Prim::expand_dims, {{"dimensions", K::ints}});
  set(Prim::transpose, {{"permutation", K::ints}});
  set(Prim::concatenate, {{"dimension", K::integer}});
  set(Prim::concat_windows, {{"dimension", K::integer},
                             {"limit_indices", K::int_lists},
                             {"start_indices", K::int_lists},
                             {"strides", K::int_lists}});
  set(Prim::move_windows, {{"dimension", K::integer}, {"slice_sizes", K::int_lists}});
  set(Prim::pad, {{"padding_config", K::int_lists}});
  set(Prim::slice,
      {{"limit_indices", K::ints}, {"start_indices", K::ints}, {"strides", K::ints_or_none}});
  set(Prim::dynamic_slice, {{"slice_sizes", K::ints}});
  set(Prim::iota, {{"dimension", K::integer}, {"dtype", K::dtype}, {"shape", K::ints}});
  set(Prim::gather, {{"axis", K::integer}, {"dims", K::integer}});
  set(Prim::gather_run, {{"axis", K::integer}, {"length", K::integer}});
  set(Prim::scatter_run, {{"axis", K::integer}, {"combine", K::name}});
  set(Prim::get_flat_run, {{"bound", K::integer}, {"length", K::integer}});
  set(Prim::swap_flat_run, {{"bound", K::integer}, {"length", K::integer}});
  set(Prim::fused, {{"jaxpr", K::jaxpr}});
  set(Prim::product_epilogue, {{"jaxpr", K::jaxpr}});
  set(Prim::row_loop, {{"jaxpr", K::jaxpr}});
  set(Prim::sort, {{"dimension", K::integer}, {"is_stable", K::boolean}, {"num_keys", K::integer}});
  set(Prim::scatter, {{"axis", K::integer}, {"unique_indices", K::boolean}, {"dims", K::integer}});
  set(Prim::scatter_add, {{"axis", K::integer}, {"dims", K::integer}});
  set(Prim::scatter_mul, {{"axis", K::integer}, {"dims", K::integer}});
  set(Prim::scatter_min, {{"axis", K::integer}, {"dims", K::integer}});
  set(Prim::scatter_max, {{"axis", K::integer}, {"dims", K::integer}});
  set(Prim::reduce_sum, {{"axes", K::ints}});
  set(Prim::reduce_max, {{"axes", K::ints}});
  set(Prim::reduce_min, {{"axes", K::ints}});
  set(Prim::argmax, {{"axes", K::ints}, {"index_dtype", K::dtype}});
  // JAX's CPU backend takes subset_by_index=None and algorithm=None (or its default) only;
  // the type rules refuse others by name.
  set(Prim::eigh, {{"algorithm", K::word_or_none},
                   {"lower", K::boolean},
                   {"sort_eigenvalues", K::boolean},
                   {"subset_by_index", K::ints_or_none}});
  set(Prim::svd, {{"algorithm", K::word_or_none},
                  {"compute_uv", K::boolean},
                  {"full_matrices", K::boolean},
                  {"subset_by_index", K::ints_or_none}});
  set(Prim::eig, {{"compute_left_eigenvectors", K::boolean},
                  {"compute_right_eigenvectors", K::boolean},
                  {"enable_eigvec_derivs", K::boolean},
                  {"implementation", K::word_or_none}});
  set(Prim::tridiagonal_solve, {{"perturb_singular", K::boolean}});
  set(Prim::triangular_solve, {{"conjugate_a", K::boolean},
                               {"left_side", K::boolean},
                               {"lower", K::boolean},
                               {"transpose_a", K::boolean},
                               {"unit_diagonal", K::boolean}});
  set(Prim::qr,
      {{"full_matrices", K::boolean}, {"pivoting", K::boolean}, {"use_magma", K::word_or_none}});
  for (Prim p : {Prim::im2col_dot, Prim::im2col_tdot})
    set(p, {{"starts", K::int_lists}, {"strides", K::ints}, {"window", K::ints}});
  for (Prim p : {Prim::dot_general, Prim::dot_accumulate})
    set(p, {{"dimension_numbers", K::dot_dims},
            {"precision", K::precision},
            {"preferred_element_type", K::dtype_or_none}});
  for (Prim p : {Prim::reduce_window_sum, Prim::reduce_window_max, Prim::reduce_window_min})
    set(p, {{"base_dilation", K::ints},
            {"padding", K::int_lists},
            {"window_dilation", K::ints},
            {"window_dimensions", K::ints},
            {"window_strides", K::ints}});
  set(Prim::select_and_gather_add, {{"base_dilation", K::ints},
                                    {"padding", K::int_lists},
                                    {"select_prim", K::name},
                                    {"window_dilation", K::ints},
                                    {"window_dimensions", K::ints},
                                    {"window_strides", K::ints}});
  set(Prim::select_and_scatter_add, {{"padding", K::int_lists},
                                     {"select_prim", K::name},
                                     {"window_dimensions", K::ints},
                                     {"window_strides", K::ints}});
  set(Prim::shift_add, {{"add_sizes", K::ints},
                        {"offset", K::integer},
                        {"side_lengths", K::ints},
                        {"side_offsets", K::ints},
                        {"write_sizes", K::ints}});
  set(Prim::get, {{"indexer", K::indexer}});
  set(Prim::swap, {{"indexer", K::indexer}});
  set(Prim::addupdate, {{"indexer", K::indexer}});
  set(Prim::jit, {{"custom_rule_missing", K::name},
                  {"jaxpr", K::jaxpr},
                  {"jvp_jaxpr", K::jaxpr},
                  {"jvp_rule_missing", K::name},
                  {"name", K::name},
                  {"policy", K::name}});
  set(Prim::scan, {{"_split_transpose", K::boolean},
                   {"jaxpr", K::jaxpr},
                   {"length", K::integer},
                   {"linear", K::bools_or_none},
                   {"num_carry", K::integer},
                   {"num_consts", K::integer},
                   {"reverse", K::boolean},
                   {"unroll", K::integer}});
  set(Prim::cond, {{"branches", K::jaxprs}});
  set(Prim::while_, {{"body_jaxpr", K::jaxpr},
                     {"body_nconsts", K::integer},
                     {"cond_jaxpr", K::jaxpr},
                     {"cond_nconsts", K::integer}});
  set(Prim::custom_vjp_call, {{"bwd_jaxpr", K::jaxpr},
                              {"call_jaxpr", K::jaxpr},
                              {"forward_unknown", K::boolean},
                              {"fwd_jaxpr", K::jaxpr},
                              {"num_res", K::integer}});
  set(Prim::linear_solve, {{"matvec_jaxpr", K::jaxpr},
                           {"num_consts", K::integer},
                           {"solve_jaxpr", K::jaxpr},
                           {"transpose_solve_jaxpr", K::jaxpr},
                           {"vecmat_jaxpr", K::jaxpr}});
  return t;
}

const RuleTable<SpecList>& specs() {
  static const RuleTable<SpecList> t = make_specs();
  return t;
}

constexpr std::array<std::string_view, 9> kJitOnlyJax = {
    "donated_invars", "inline",      "keep_unused", "in_shardings",        "out_shardings",
    "in_layouts",     "out_layouts", "ctx_mesh",    "compiler_options_kvs"};
constexpr std::array<std::string_view, 2> kNewRefOnlyJax = {"memory_space", "pin"};

bool contains(std::span<const std::string_view> names, std::string_view n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

}  // namespace

const std::vector<ParamSpec>& param_specs(Prim p) {
  static const std::vector<ParamSpec> none;
  const SpecList* s = specs().find(p);
  return s ? **s : none;
}

const ParamSpec* find_param_spec(Prim p, std::string_view name) {
  for (const ParamSpec& s : param_specs(p))
    if (s.name == name) return &s;
  return nullptr;
}

bool is_ignored_param(Prim p, std::string_view name) {
  if (name == "sharding" || name == "out_sharding") return true;
  if (p == Prim::jit) return contains(kJitOnlyJax, name);
  if (p == Prim::new_ref) return contains(kNewRefOnlyJax, name);
  // lax.platform_dependent's cond: the index (platform_index) already chose the branch.
  if (p == Prim::cond) return name == "branches_platforms";
  return false;
}

}  // namespace refjit::text
