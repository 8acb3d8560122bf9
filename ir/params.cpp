#include "refjit/ir/params.h"

#include <fmt/format.h>

#include <algorithm>

#include "refjit/ir/error.h"

namespace refjit {

std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& contract,
                               const std::vector<int64_t>& batch) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(contract.begin(), contract.end(), d) == contract.end() &&
        std::find(batch.begin(), batch.end(), d) == batch.end())
      free.push_back(d);
  return free;
}

Params::Params(std::initializer_list<std::pair<std::string, ParamValue>> init) {
  for (const auto& [k, v] : init) set(k, v);
}

void Params::set(std::string name, ParamValue value) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, const std::string& n) { return e.first < n; });
  if (it != entries_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    entries_.insert(it, {std::move(name), std::move(value)});
  }
}

const ParamValue* Params::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, std::string_view n) { return e.first < n; });
  if (it != entries_.end() && it->first == name) return &it->second;
  return nullptr;
}

bool Params::has(std::string_view name) const { return find(name) != nullptr; }

void Params::erase(std::string_view name) {
  std::erase_if(entries_, [&](const auto& e) { return e.first == name; });
}

void Params::throw_bad(std::string_view name, bool missing) {
  if (missing) throw TypeError("missing param '" + std::string(name) + "'");
  throw TypeError("param '" + std::string(name) + "' has the wrong kind of value");
}

RefKind ref_kind_param(const Params& params) {
  const std::string kind = params.get_or<std::string>("kind", "None");
  if (std::optional<RefKind> k = parse_ref_kind(kind)) return *k;
  throw TypeError(
      fmt::format("new_ref: unknown ref kind '{}' (refjit knows no_grad_no_remat)", kind));
}

}  // namespace refjit
