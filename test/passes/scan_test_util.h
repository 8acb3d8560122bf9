// Building blocks shared by the scan autodiff tests: scan eqns around a parsed body, common
// types, and finding the scans of a (transformed) jaxpr.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "refjit/ir/builder.h"
#include "test/passes/ad_check.h"

namespace refjit::testing {

inline JaxprPtr body(const std::string& text) { return std::make_shared<const Jaxpr>(parse(text)); }

inline Params scan_params(JaxprPtr b, int64_t length, int64_t nc, int64_t ncar,
                          bool reverse = false) {
  return Params{{"jaxpr", std::move(b)}, {"length", length},         {"reverse", reverse},
                {"num_consts", nc},      {"num_carry", ncar},        {"linear", NoneParam{}},
                {"unroll", int64_t{1}},  {"_split_transpose", false}};
}

// A jaxpr with invars of the given types feeding one scan; returns all its outputs.
inline Jaxpr scan_of(const std::vector<Type>& in_types, JaxprPtr b, int64_t length, int64_t nc,
                     int64_t ncar, bool reverse = false) {
  JaxprBuilder jb;
  std::vector<Atom> ins;
  for (const Type& t : in_types) ins.push_back(jb.add_invar(t));
  std::vector<Var> outs =
      jb.add_eqn(Prim::scan, ins, scan_params(std::move(b), length, nc, ncar, reverse));
  jb.set_outvars(std::vector<Atom>(outs.begin(), outs.end()));
  return jb.finish();
}

inline const ArrayType kF64{DType::f64, {}};
inline const ArrayType kI32{DType::i32, {}};
inline ArrayType f64v(int64_t n) { return ArrayType{DType::f64, {n}}; }
inline ArrayType f64m(int64_t r, int64_t c) { return ArrayType{DType::f64, {r, c}}; }
inline ArrayType i32v(int64_t n) { return ArrayType{DType::i32, {n}}; }

inline Array i32s(std::vector<int32_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Array::from_vector<int32_t>(std::move(v), {n});
}

// Every scan eqn of `j` (recursively through scan bodies), outermost first.
inline void collect_scans(const Jaxpr& j, std::vector<const Eqn*>& out) {
  for (const Eqn& e : j.eqns)
    if (e.prim == Prim::scan) {
      out.push_back(&e);
      collect_scans(*e.params.get<JaxprPtr>("jaxpr"), out);
    }
}

inline const Jaxpr& scan_body(const Eqn& e) { return *e.params.get<JaxprPtr>("jaxpr"); }

}  // namespace refjit::testing
