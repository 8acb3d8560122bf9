// The seed "Autodiff with refs" (autodiff-with-refs.txt) through refjit's C++ API, printing
// the numbers the seed prints, plus the retain_graph example (retain-graph-equivalent.txt).
#include <refjit/refjit.h>

#include <exception>
#include <iostream>
#include <optional>
#include <string>

using namespace refjit;

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

int main() {
  try {
    // pure2: refs used only inside are invisible to autodiff.
    auto pure2 = jit(
        [](Value x) {
          Ref ref = new_ref(x);
          ref.set(ref.get() + ref.get());
          return ref.get();
        },
        "pure2");
    std::cout << "grad(pure2)(3.0) = " << grad(pure2)(3.0f) << "\n";

    // Plumbing refs: only stop_gradient'ed values may be written into them.
    auto err6 = [](Value x, Ref some_plumbing_ref) {
      Value y = x + x;
      some_plumbing_ref[ellipsis] += y;
      return y;
    };
    auto foo = [](Value x, Ref some_plumbing_ref) {
      Value y = x + x;
      some_plumbing_ref[ellipsis] += stop_gradient(y);
      return y;
    };
    Ref plumbing = new_ref(0.0f);
    try {
      grad(err6)(1.0f, plumbing);
    } catch (const RefError& e) {
      std::cout << "err6: " << e.code() << "\n";
    }
    std::cout << "grad(foo)(1.0) = " << grad(foo)(1.0f, plumbing) << "\n";

    // stash_grads: a custom_vjp whose bwd writes the cotangent into a shared ref.
    auto stash_grads = custom_vjp([](Ref, Value x) { return x; },
                                  [](Ref grads_ref, Value x) {
                                    return std::tuple{x, grads_ref};
                                  },
                                  [](Ref grads_ref, Value g) {
                                    grads_ref.set(g);
                                    return std::tuple{std::nullopt, g};
                                  },
                                  "stash_grads");
    auto f = [&](Value x, Ref grads_ref) { return sin(stash_grads(grads_ref, x)); };
    Ref grads_ref = new_ref(0.0f);
    grad(f)(1.0f, grads_ref);
    std::cout << "stash_grads: " << grads_ref << "\n";

    // Differentiating with respect to a Ref argument.
    auto sq = [](Ref x_ref) { return integer_pow(x_ref.get(), 2); };
    {
      auto [y, f_vjp] = vjp(sq, new_ref(2.0f));
      Ref x_grad_ref = new_ref(0.0f);
      f_vjp.with_refs(x_grad_ref)(1.0);
      std::cout << "x_ref**2: " << x_grad_ref << "\n";
      try {
        f_vjp(1.0);
      } catch (const RefError& e) {
        std::cout << "without with_refs: " << e.code() << ": " << e.what() << "\n";
      }
    }
    {
      Ref x_grad_ref = new_ref(100.0f);
      auto [y, f_vjp] = vjp(sq, new_ref(2.0f));
      f_vjp.with_refs(x_grad_ref)(1.0);
      std::cout << "accumulated: " << x_grad_ref << "\n";
    }
    {
      auto g = [](Ref x_ref) {
        x_ref.set(sin(x_ref.get()));
        return integer_pow(x_ref.get(), 2);
      };
      Ref x_ref = new_ref(2.0f);
      auto [y, g_vjp] = vjp(g, x_ref);
      Ref g_grad_ref = new_ref(0.0f);
      g_vjp.with_refs(g_grad_ref)(1.0);
      std::cout << "written ref: " << g_grad_ref << "\n";
    }

    // Gradient refs for value arguments.
    {
      auto [y, sin_vjp] = vjp([](Value x) { return sin(x); }, 1.0f);
      auto [x_bar] = sin_vjp(1.0);
      std::cout << "sin x_bar = " << x_bar << "\n";
      Ref grad_ref = new_ref(0.0f);
      sin_vjp.with_refs(grad_ref)(1.0);
      std::cout << "sin grad_ref: " << grad_ref << "\n";
    }

    // take: one-hot as a value, sparse in-place accumulation with a gradient ref.
    auto take = jit([](Value x, Value i) { return x[i]; }, "take");
    Value x = arange(10, DType::f32);
    {
      auto [y, take_vjp] = vjp(take, x, 3);
      auto [x_bar, i_bar] = take_vjp(1.0);
      std::cout << "take x_bar = " << x_bar << "\n";
    }
    Ref grad_ref = new_ref(zeros({10}));
    for (int i : {3, 5, 3}) {
      auto [y, take_vjp] = vjp(take, x, i);
      take_vjp.with_refs(grad_ref, GradValue{})(1.0);
    }
    std::cout << "take grad_ref: " << grad_ref << "\n";
    auto take_vjp_jaxpr = make_jaxpr([&]() {
      auto [y, take_vjp] = vjp(take, x, 3);
      take_vjp.with_refs(grad_ref, GradValue{})(1.0);
    });
    std::cout << take_vjp_jaxpr() << "\n";

    // DontWant.
    auto predict = [](Value W, Value xv) { return matmul(W, xv); };
    Value W = ones({4, 4});
    Value xs = ones({4});
    auto [py, f_vjp] = vjp(predict, W, xs);
    auto [W_bar, x_bar] = f_vjp.with_refs(GradValue{}, DontWant{})(ones({4}));
    std::cout << "W_bar[0] = " << W_bar.value()[0] << "\n";
    std::cout << "x_bar = " << x_bar << "\n";
    std::string both = make_jaxpr([&]() { return f_vjp(ones({4}))[0].value(); })().str();
    std::string only_W = make_jaxpr([&]() {
                           return f_vjp.with_refs(GradValue{}, DontWant{})(ones({4}))[0].value();
                         })()
                             .str();
    std::cout << "dot_general: " << count(both, "dot_general") << " "
              << count(only_W, "dot_general") << "\n";

    // retain_graph: one forward pass, two backward passes.
    auto forward = [](Value v) { return sin(v) * cos(v); };
    auto [fy, fwd_vjp] = vjp(forward, ones({5}));
    auto [grad1] = fwd_vjp(ones_like(fy));
    auto [modified_y, g_vjp] = vjp([](Value v) { return v * 2; }, fy);
    auto [g_ct] = g_vjp(ones_like(modified_y));
    auto [grad2] = fwd_vjp(g_ct.value());
    std::cout << "grad1 = " << grad1 << "\n";
    std::cout << "grad2 = " << grad2 << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
