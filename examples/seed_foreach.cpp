// The seed's foreach recipe (autodiff-with-refs.txt, "foreach, a new way to write scan"):
//
//   r = jax.new_ref(0)
//   xs = jnp.arange(10)
//
//   @foreach(xs)
//   def ys(x):
//     r[...] += x
//     return x * 2
//
//   print(r)   # Ref(45, dtype=int32)
//   print(ys)  # [ 0  2  4  6  8 10 12 14 16 18]
//
// The loop runs now, updating r in place; inside make_jaxpr it stages one scan eqn whose
// body closes over r (a Ref-typed const of the scan).
#include <refjit/refjit.h>

#include <exception>
#include <iostream>

using namespace refjit;

int main() {
  try {
    Ref r = new_ref(0);
    Value xs = arange(10);

    Value ys = foreach (xs)([&](Value x) {
      r[ellipsis] += x;
      return x * 2;
    });
    std::cout << r << "\n";
    std::cout << ys << "\n";

    auto staged = make_jaxpr([&](Value xs) {
      return foreach (xs)([&](Value x) {
        r[ellipsis] += x;
        return x * 2;
      });
    });
    std::cout << staged(xs) << "\n";
    std::cout << r << "\n";  // tracing ran nothing
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
