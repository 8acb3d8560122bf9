#include "refjit/ir/primitive.h"

#include <array>
#include <string>

#include "ir/type_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

constexpr std::array<std::string_view, kNumPrims> kNames = {
#define PRIM(id, name, ad, kind, effect) name,
#include "refjit/ir/primitives.def"
#undef PRIM
};

constexpr std::array<AdRules, kNumPrims> kAdRules = {
#define PRIM(id, name, ad, kind, effect) AdRules::ad,
#include "refjit/ir/primitives.def"
#undef PRIM
};

constexpr std::array<PrimKind, kNumPrims> kKinds = {
#define PRIM(id, name, ad, kind, effect) PrimKind::kind,
#include "refjit/ir/primitives.def"
#undef PRIM
};

constexpr std::array<RefEffect, kNumPrims> kEffects = {
#define PRIM(id, name, ad, kind, effect) RefEffect::effect,
#include "refjit/ir/primitives.def"
#undef PRIM
};

std::array<PrimInfo, kNumPrims> make_registry() {
  std::array<PrimInfo, kNumPrims> infos{};
  TypeRuleTable rules{};
  register_type_rules(rules);
  for (int i = 0; i < kNumPrims; ++i) {
    Prim p = static_cast<Prim>(i);
    const PrimKind kind = kKinds[i];
    infos[i] = PrimInfo{p,
                        kNames[i],
                        rules[i],
                        kEffects[i],
                        kind == PrimKind::structured,
                        kind == PrimKind::collective,
                        kind == PrimKind::host_call,
                        kind == PrimKind::elementwise,
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
