// Helpers for the interpreter tests: build small jaxprs with explicit output types (so the
// tests do not depend on which type rules are registered) and run them.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "refjit/array.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"
#include "runtime/interpreter.h"

namespace refjit::test {

inline ArrayType at(DType d, Shape s = {}) { return ArrayType{d, std::move(s)}; }

template <class T>
Array arr(std::vector<T> v, Shape s) {
  return Array::from_vector<T>(v, std::move(s));
}
template <class T>
Array vec(std::vector<T> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Array::from_vector<T>(v, std::move(s));
}

template <class T>
std::vector<T> values(const Array& a) {
  auto s = a.values<T>();
  return std::vector<T>(s.begin(), s.end());
}

// Appends `prim` with explicit output types; returns the outputs.
inline std::vector<Var> emit(JaxprBuilder& b, Prim prim, std::vector<Atom> ins, Params params,
                             std::vector<Type> outs) {
  std::vector<Var> vs;
  for (Type& t : outs) vs.push_back(b.new_var(std::move(t)));
  b.add_eqn_with_outs(prim, std::move(ins), std::move(params), vs);
  return vs;
}
inline Var emit1(JaxprBuilder& b, Prim prim, std::vector<Atom> ins, Params params, Type out) {
  return emit(b, prim, std::move(ins), std::move(params), {std::move(out)})[0];
}

// Runs one primitive on array operands; the output types are given explicitly.
inline std::vector<Array> eval_prim(Prim prim, const std::vector<Array>& ins, Params params,
                                    std::vector<Type> outs) {
  JaxprBuilder b;
  std::vector<Atom> atoms;
  std::vector<RtValue> args;
  for (const Array& a : ins) {
    atoms.push_back(b.add_invar(a.type()));
    args.push_back(a);
  }
  std::vector<Var> vs = emit(b, prim, atoms, std::move(params), std::move(outs));
  b.set_outvars(std::vector<Atom>(vs.begin(), vs.end()));
  Jaxpr j = b.finish();
  std::vector<RtValue> res = interpret(j, args);
  std::vector<Array> out;
  for (RtValue& v : res) out.push_back(std::get<Array>(v));
  return out;
}
inline Array eval1(Prim prim, const std::vector<Array>& ins, Params params, Type out) {
  return eval_prim(prim, ins, std::move(params), {std::move(out)})[0];
}

inline const Array& as_array(const RtValue& v) { return std::get<Array>(v); }

}  // namespace refjit::test
