// Building blocks shared by the scan autodiff tests: scan eqns around a parsed body, common
// types, and finding the scans of a (transformed) jaxpr.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "passes/emitter.h"
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

// The seed's insert loss (grad-scan-slice-update-slow) around a scan `insert` body over
// (rows, cols, vals**w) with a f64[rows, 2*cols+1] carry:
//   loss(w, init, target, rows, cols, vals) = sum((target - carry[:, :cols])**2), divided by
//   its element count when `mean`.
inline Jaxpr seed_insert_loss(JaxprPtr insert, int64_t rows, int64_t cols, int64_t steps,
                              bool mean) {
  JaxprBuilder b;
  Var w = b.add_invar(kF64);
  Var init = b.add_invar(f64m(rows, 2 * cols + 1));
  Var target = b.add_invar(f64m(rows, cols));
  Var row_ids = b.add_invar(i32v(steps));
  Var col_ids = b.add_invar(i32v(steps));
  Var vals = b.add_invar(f64v(steps));
  Emitter e(b);
  Atom vw = e.emit1(Prim::pow, {vals, e.broadcast_to(w, {steps})});
  std::vector<Var> outs = b.add_eqn(Prim::scan, {init, row_ids, col_ids, vw},
                                    scan_params(std::move(insert), steps, 0, 1));
  Atom head = e.emit1(Prim::slice, {outs[0]},
                      Params{{"start_indices", IntList{0, 0}},
                             {"limit_indices", IntList{rows, cols}},
                             {"strides", NoneParam{}}});
  Atom d = e.sub(target, head);
  Atom total = e.reduce_sum(e.mul(d, d), {0, 1});
  b.set_outvars(
      {mean ? e.div(total, e.scalar(DType::f64, static_cast<double>(rows * cols))) : total});
  return b.finish();
}

}  // namespace refjit::testing
