// Transpose rules of the linear elementwise primitives. A binary op whose operand was a
// broadcast scalar sums its cotangent back down to a scalar.
#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Shape operand_shape(Emitter& e, const TransposeArgs& a, size_t i) {
  return a.acc[i] ? a.acc[i]->type().shape : e.array_type_of(a.val[i]).shape;
}

}  // namespace

void register_elementwise_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::neg, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0)) a.acc[0]->add(e, e.neg(a.ct0()));
  });
  for (Prim p : {Prim::add, Prim::add_any, Prim::sub}) {
    t.set(p, [p](Emitter& e, TransposeArgs& a) {
      for (size_t i = 0; i < 2; ++i) {
        if (!a.wants(i)) continue;
        Atom c = e.sum_to(a.ct0(), operand_shape(e, a, i));
        a.acc[i]->add(e, p == Prim::sub && i == 1 ? e.neg(c) : c);
      }
    });
  }
  // mul/div are linear in one operand (the other is a residual).
  t.set(Prim::mul, [](Emitter& e, TransposeArgs& a) {
    for (size_t i = 0; i < 2; ++i) {
      if (!a.wants(i)) continue;
      if (a.linear(1 - i)) throw Error("transpose: `mul` of two linear values is not linear");
      a.acc[i]->add(e, e.sum_to(e.mul(a.ct0(), a.val[1 - i]), operand_shape(e, a, i)));
    }
  });
  t.set(Prim::div, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(1)) throw Error("transpose: `div` is not linear in its divisor");
    if (a.wants(0)) a.acc[0]->add(e, e.sum_to(e.div(a.ct0(), a.val[1]), operand_shape(e, a, 0)));
  });
  t.set(Prim::convert_element_type, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0)) a.acc[0]->add(e, e.convert(a.ct0(), a.acc[0]->type().dtype));
  });
  // JAX's transposes (no conjugation is implied by transposing): real: ct -> complex(ct, 0);
  // imag: ct -> complex(0, -ct); conj: conj(ct), or real(ct) for a real operand;
  // complex(re, im): real(ct) to re, -imag(ct) to im.
  t.set(Prim::real, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    Atom ct = a.ct0();
    a.acc[0]->add(e, e.emit1(Prim::complex, {ct, e.scalar(e.array_type_of(ct).dtype, 0.0)}));
  });
  t.set(Prim::imag, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    Atom ct = a.ct0();
    a.acc[0]->add(e, e.emit1(Prim::complex, {e.scalar(e.array_type_of(ct).dtype, 0.0), e.neg(ct)}));
  });
  t.set(Prim::conj, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    Atom ct = a.ct0();
    const DType operand = a.acc[0]->type().dtype;
    a.acc[0]->add(
        e, is_complex(operand) ? e.emit1(Prim::conj, {ct}, a.eqn.params) : e.unary(Prim::real, ct));
  });
  t.set(Prim::complex, [](Emitter& e, TransposeArgs& a) {
    Atom ct = a.ct0();
    if (a.wants(0)) a.acc[0]->add(e, e.sum_to(e.unary(Prim::real, ct), operand_shape(e, a, 0)));
    if (a.wants(1))
      a.acc[1]->add(e, e.sum_to(e.neg(e.unary(Prim::imag, ct)), operand_shape(e, a, 1)));
  });
  // stop_gradient's value is its operand's, so in a linear program (a custom rule's tangent
  // part) it is the identity map; its JVP is zero instead.
  for (Prim p : {Prim::copy, Prim::checkpoint_name, Prim::stop_gradient})
    t.set(p, [](Emitter& e, TransposeArgs& a) {
      if (a.wants(0)) a.acc[0]->add(e, a.ct0());
    });
  // select_n: case i receives the cotangent where it was chosen, zeros elsewhere.
  t.set(Prim::select_n, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(0)) throw Error("transpose: `select_n` is not linear in its predicate");
    const ArrayType out = e.array_type_of(a.ct0());
    for (size_t i = 1; i < a.acc.size(); ++i) {
      if (!a.wants(i)) continue;
      std::vector<Atom> cases;
      Atom z = e.zeros(out);
      for (size_t j = 1; j < a.acc.size(); ++j) cases.push_back(j == i ? a.ct0() : z);
      a.acc[i]->add(e, e.select(a.val[0], cases));
    }
  });
}

}  // namespace refjit
