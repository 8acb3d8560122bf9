// The seed's `take` (autodiff-with-refs.txt) and the sparse in-place update its backward
// pass performs into a gradient ref:
//
//   @jax.jit
//   def take(x, i):
//     return x[i]
//
//   x = jnp.arange(10.)
//   grad_ref = jax.new_ref(jnp.zeros(10))
//   for i in [3, 5, 3]: ... b[c:c+1] += j ...   # one element per backward pass
//   print(grad_ref)  # Ref([0., 0., 0., 2., 0., 1., 0., 0., 0., 0.])
#include <refjit/refjit.h>

#include <exception>
#include <iostream>

using namespace refjit;

int main() {
  try {
    auto take = jit([](Value x, Value i) { return x[i]; }, "take");
    Value x = arange(10, DType::f32);

    std::cout << make_jaxpr(take)(x, 3) << "\n";
    std::cout << "take(x, 3) = " << take(x, 3) << "\n";
    std::cout << "take(x, -1) = " << take(x, -1) << "\n";

    // What take's backward pass does with a gradient ref bound: b[c:c+1] += ct, written
    // here by hand (vjp/with_refs produce the same jaxpr).
    auto take_bwd =
        jit([](Value i, Ref grad, Value ct) { grad.add(ds(i, 1), broadcast_in_dim(ct, {1}, {})); },
            "take");
    Ref grad_ref = new_ref(zeros({10}));
    std::cout << make_jaxpr(take_bwd)(3, grad_ref, 1.0f) << "\n";
    for (int i : {3, 5, 3}) take_bwd(i, grad_ref, 1.0f);
    std::cout << grad_ref << "\n";
    std::cout << "traces: " << take.trace_count() << " " << take_bwd.trace_count() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
