// Transpose rules of the linear elementwise primitives. A binary op whose operand was a
// broadcast scalar sums its cotangent back down to a scalar.
#include "passes/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Atom ct0(Emitter& e, const TransposeArgs& a) { return *a.ct[0]; }

Shape operand_shape(Emitter& e, const TransposeArgs& a, size_t i) {
  return a.acc[i] ? a.acc[i]->type().shape : e.array_type_of(a.val[i]).shape;
}

}  // namespace

void register_elementwise_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::neg, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0)) a.acc[0]->add(e, e.neg(ct0(e, a)));
  });
  for (Prim p : {Prim::add, Prim::add_any, Prim::sub}) {
    t.set(p, [p](Emitter& e, TransposeArgs& a) {
      for (size_t i = 0; i < 2; ++i) {
        if (!a.wants(i)) continue;
        Atom c = e.sum_to(ct0(e, a), operand_shape(e, a, i));
        a.acc[i]->add(e, p == Prim::sub && i == 1 ? e.neg(c) : c);
      }
    });
  }
  // mul/div are linear in one operand (the other is a residual).
  t.set(Prim::mul, [](Emitter& e, TransposeArgs& a) {
    for (size_t i = 0; i < 2; ++i) {
      if (!a.wants(i)) continue;
      if (a.linear(1 - i)) throw Error("transpose: `mul` of two linear values is not linear");
      a.acc[i]->add(e, e.sum_to(e.mul(ct0(e, a), a.val[1 - i]), operand_shape(e, a, i)));
    }
  });
  t.set(Prim::div, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(1)) throw Error("transpose: `div` is not linear in its divisor");
    if (a.wants(0)) a.acc[0]->add(e, e.sum_to(e.div(ct0(e, a), a.val[1]), operand_shape(e, a, 0)));
  });
  t.set(Prim::convert_element_type, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0)) a.acc[0]->add(e, e.convert(ct0(e, a), a.acc[0]->type().dtype));
  });
  for (Prim p : {Prim::copy, Prim::checkpoint_name})
    t.set(p, [](Emitter& e, TransposeArgs& a) {
      if (a.wants(0)) a.acc[0]->add(e, ct0(e, a));
    });
  // select_n: case i receives the cotangent where it was chosen, zeros elsewhere.
  t.set(Prim::select_n, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(0)) throw Error("transpose: `select_n` is not linear in its predicate");
    const ArrayType out = e.array_type_of(ct0(e, a));
    for (size_t i = 1; i < a.acc.size(); ++i) {
      if (!a.wants(i)) continue;
      std::vector<Atom> cases;
      Atom z = e.zeros(out);
      for (size_t j = 1; j < a.acc.size(); ++j) cases.push_back(j == i ? ct0(e, a) : z);
      a.acc[i]->add(e, e.select(a.val[0], cases));
    }
  });
}

}  // namespace refjit
