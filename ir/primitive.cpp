#include "refjit/ir/primitive.h"

#include <array>
#include <string>

#include "ir/type_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

constexpr std::array<std::string_view, kNumPrims> kNames = {
#define PRIM(id, name, ad) name,
#include "refjit/ir/primitives.def"
#undef PRIM
};

constexpr std::array<AdRules, kNumPrims> kAdRules = {
#define PRIM(id, name, ad) AdRules::ad,
#include "refjit/ir/primitives.def"
#undef PRIM
};

RefEffect effect_of(Prim p) {
  switch (p) {
    case Prim::new_ref: return RefEffect::create;
    case Prim::get: return RefEffect::read;
    case Prim::swap: return RefEffect::write;
    case Prim::addupdate:
    case Prim::dot_accumulate: return RefEffect::accum;
    case Prim::freeze: return RefEffect::consume;
    default: return RefEffect::none;
  }
}

bool has_subjaxprs(Prim p) {
  return p == Prim::jit || p == Prim::scan || p == Prim::cond || p == Prim::while_ ||
         p == Prim::custom_vjp_call || p == Prim::linear_solve;
}

// Collectives: every rank must run each of them, in the same order.
bool communicates(Prim p) {
  return p == Prim::psum || p == Prim::all_gather || p == Prim::broadcast_from ||
         p == Prim::axis_index;
}

// Calls a host function: what it does is invisible to the program, so it is never dropped.
bool host_effect(Prim p) { return p == Prim::debug_callback; }

// primitives.def lists the elementwise primitives first, from neg to select_n.
bool elementwise(Prim p) {
  return static_cast<int>(p) >= static_cast<int>(Prim::neg) &&
         static_cast<int>(p) <= static_cast<int>(Prim::select_n);
}

std::array<PrimInfo, kNumPrims> make_registry() {
  std::array<PrimInfo, kNumPrims> infos{};
  TypeRuleTable rules{};
  register_type_rules(rules);
  for (int i = 0; i < kNumPrims; ++i) {
    Prim p = static_cast<Prim>(i);
    infos[i] = PrimInfo{p,
                        kNames[i],
                        rules[i],
                        effect_of(p),
                        has_subjaxprs(p),
                        communicates(p),
                        host_effect(p),
                        elementwise(p),
                        kAdRules[i]};
  }
  return infos;
}

const std::array<PrimInfo, kNumPrims>& registry() {
  static const std::array<PrimInfo, kNumPrims> r = make_registry();
  return r;
}

}  // namespace

std::string_view prim_name(Prim p) { return kNames[static_cast<int>(p)]; }

std::optional<Prim> prim_from_name(std::string_view name) {
  if (name == "mutable_array") return Prim::new_ref;
  if (name == "pjit" || name == "closed_call") return Prim::jit;
  if (name == "copy_p") return Prim::copy;
  for (int i = 0; i < kNumPrims; ++i)
    if (kNames[i] == name) return static_cast<Prim>(i);
  return std::nullopt;
}

const PrimInfo& prim_info(Prim p) { return registry()[static_cast<int>(p)]; }

std::vector<Type> infer_types(Prim p, std::span<const Type> in, const Params& params) {
  const PrimInfo& info = prim_info(p);
  if (!info.type_rule) throw TypeError(std::string(info.name) + ": no type rule registered");
  return info.type_rule(in, params);
}

}  // namespace refjit
