// The seed's `pure2` (autodiff-with-refs.txt): a pure function that uses a ref internally.
//
//   @jax.jit
//   def pure2(x):
//     ref = jax.new_ref(x)
//     ref[...] = ref[...] + ref[...]
//     return ref[...]
#include <refjit/refjit.h>

#include <exception>
#include <iostream>

using refjit::Ref;
using refjit::Value;

Value pure2(Value x) {
  Ref ref = refjit::new_ref(x);
  ref[refjit::ellipsis] = ref[refjit::ellipsis] + ref[refjit::ellipsis];
  return ref[refjit::ellipsis];
}

int main() {
  try {
    auto jitted = refjit::jit(pure2, "pure2");
    std::cout << refjit::make_jaxpr(pure2)(3.0f) << "\n";
    std::cout << refjit::make_jaxpr(jitted)(3.0f) << "\n";
    std::cout << "pure2(3.0) = " << jitted(3.0f) << "\n";
    std::cout << "pure2(-1.25) = " << jitted(-1.25f) << "\n";
    std::cout << "traces: " << jitted.trace_count() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
