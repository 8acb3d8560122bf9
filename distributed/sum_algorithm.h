// Which fixed-order sum psum runs over MPI (distributed/mpi_group.cpp), and the order each
// adds in: what the tests compute their expected bits from.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace refjit::distributed {

enum class SumAlgorithm { segments, tree };

// Which sum is cheaper for `bytes` over `members`, by the cost model of docs/distributed.md
// ("Cost model"): with a per-message latency a and a per-byte time b,
//   segments: 2 (P - 1) a + 2 n b (P - 1) / P      tree: 2 log2(P) (a + n b)
// a = 5 us and b = 0.25 ns (4 GB/s): between shared memory's latency and a network's, where
// the tree pays from four members up for arrays of a few thousand floats (tens of thousands at
// 64 members); on two members the segments always win. REFJIT_PSUM_ALGORITHM (tree or
// segments) overrides the choice, for measuring.
inline SumAlgorithm sum_algorithm(int64_t bytes, int members) {
  static const char* forced = std::getenv("REFJIT_PSUM_ALGORITHM");
  if (forced && std::string_view(forced) == "tree") return SumAlgorithm::tree;
  if (forced && std::string_view(forced) == "segments") return SumAlgorithm::segments;
  constexpr double a = 5e-6, b = 0.25e-9;
  const double p = members, n = static_cast<double>(bytes);
  const double segments = 2 * (p - 1) * a + 2 * n * b * (p - 1) / p;
  const double tree = 2 * std::ceil(std::log2(p)) * (a + n * b);
  return tree < segments ? SumAlgorithm::tree : SumAlgorithm::segments;
}

// The sum of `x` (one value per member) as `algorithm` adds it, with `add(a, b)` one rounded
// addition: rank order for the segments, the binomial tree's order for the tree.
template <class T, class Add>
T ordered_sum(SumAlgorithm algorithm, std::vector<T> x, Add add) {
  const size_t p = x.size();
  if (algorithm == SumAlgorithm::segments) {
    for (size_t r = 1; r < p; ++r) x[0] = add(x[0], x[r]);
    return x[0];
  }
  for (size_t step = 1; step < p; step <<= 1)
    for (size_t r = 0; r + step < p; r += 2 * step) x[r] = add(x[r], x[r + step]);
  return x[0];
}

}  // namespace refjit::distributed
