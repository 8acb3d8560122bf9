#include "fuzz/fuzz_util.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>

#include "refjit/array.h"

namespace refjit::fuzz {

namespace {

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 4;

int64_t sat_add(int64_t a, int64_t b) { return a > kHuge - b ? kHuge : a + b; }
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kHuge / b ? kHuge : a * b;
}
int64_t elements(const Type& t) {
  int64_t n = 1;
  for (int64_t d : t.shape()) n = sat_mul(n, d < 0 ? kHuge : d);
  return n;
}

int64_t cost(const Jaxpr& j);

int64_t eqn_cost(const Jaxpr& j, const Eqn& e) {
  int64_t c = 1;
  for (const Atom& a : e.ins) c = sat_add(c, elements(j.type_of(a)));
  for (Var v : e.outs) c = sat_add(c, elements(j.type_of(v)));
  if (e.prim == Prim::dot_general && e.ins.size() == 2)
    c = sat_add(c, sat_mul(elements(j.type_of(e.ins[0])), elements(j.type_of(e.ins[1]))));
  for (const auto& [name, value] : e.params.entries()) {
    if (const JaxprPtr* sub = std::get_if<JaxprPtr>(&value)) {
      if (!*sub) continue;
      int64_t times = 1;
      if (e.prim == Prim::scan) times = std::max<int64_t>(1, e.params.get_or<int64_t>("length", 1));
      c = sat_add(c, sat_mul(times, cost(**sub)));
    } else if (const JaxprList* subs = std::get_if<JaxprList>(&value)) {
      for (const JaxprPtr& s : *subs)
        if (s) c = sat_add(c, cost(*s));
    }
  }
  return c;
}

int64_t cost(const Jaxpr& j) {
  int64_t c = 0;
  for (const VarInfo& v : j.vars) c = sat_add(c, elements(v.type));
  for (const Eqn& e : j.eqns) c = sat_add(c, eqn_cost(j, e));
  return c;
}

}  // namespace

bool within_budget(const Jaxpr& jaxpr, int64_t budget) { return cost(jaxpr) <= budget; }

RtValue make_value(const Type& t, uint64_t salt) {
  Array a(t.array);
  for (int64_t i = 0; i < a.size(); ++i) {
    uint64_t h = (salt + static_cast<uint64_t>(i)) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    switch (t.dtype()) {
      case DType::f32:
      case DType::f64: a.set_from_double(i, static_cast<double>(h % 17) * 0.25 - 2.0); break;
      case DType::bool_: a.set_from_double(i, static_cast<double>(h % 2)); break;
      default:  // integers; unsigned ones wrap -2 and -1 to their largest values
        a.set_from_double(i, static_cast<double>(h % 7) - 2.0);
        break;
    }
  }
  if (t.is_ref) return std::make_shared<RefBuffer>(a);
  return a;
}

std::vector<RtValue> make_args(const Jaxpr& jaxpr, uint64_t salt) {
  std::vector<RtValue> args;
  uint64_t k = 0;
  for (Var v : jaxpr.constvars) args.push_back(make_value(jaxpr.type_of(v), salt + 1000 * ++k));
  for (Var v : jaxpr.invars) args.push_back(make_value(jaxpr.type_of(v), salt + 1000 * ++k));
  return args;
}

std::vector<RtValue> copy_values(const std::vector<RtValue>& args) {
  std::vector<RtValue> r;
  for (const RtValue& v : args) {
    if (const RefBufferPtr* p = std::get_if<RefBufferPtr>(&v))
      r.push_back(std::make_shared<RefBuffer>((*p)->value()));
    else
      r.push_back(v);
  }
  return r;
}

void fail(std::string_view what, std::string_view detail, std::string_view input) {
  std::fprintf(stderr, "\n==== refjit fuzz finding: %.*s\n%.*s\n==== input:\n%.*s\n====\n",
               static_cast<int>(what.size()), what.data(), static_cast<int>(detail.size()),
               detail.data(), static_cast<int>(input.size()), input.data());
  std::abort();
}

uint64_t hash_bytes(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

}  // namespace refjit::fuzz
