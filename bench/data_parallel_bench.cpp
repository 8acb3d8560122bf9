// refjit_bench_data_parallel: one data-parallel training step of an MLP (16 -> width -> width
// -> 1, tanh, 128 rows per process), its gradients summed over the processes with one psum per
// parameter as JAX's shard_map program has them, timed three ways in one run
// (docs/distributed.md "Overlapping the sums"):
//   alone       the same step with the axis bound to this process alone: the computation;
//   in line     every psum where the program has it (compiled with REFJIT_OVERLAP_SUMS=0);
//   overlapped  as refjit compiles it: the sums started where each gradient is ready,
//               bucketed, waited for where they are read.
//   mpirun -np 2 build/release/bench/refjit_bench_data_parallel [width ...]
// Rank 0 prints microseconds per step (the median of rounds that alternate the three, each
// round in another order).
#include <fmt/format.h>
#include <mpi.h>
#include <refjit/distributed.h>
#include <refjit/refjit.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace refjit;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kRows = 128;  // per process
constexpr int64_t kFeatures = 16;

Array pattern(const Shape& shape, float scale, int salt) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(salt));
  return Array::from_vector<float>(v, shape);
}

Value layer(const Value& x, const Value& w, const Value& b) {
  const int64_t rows = x.shape()[0], width = w.shape()[1];
  return matmul(x, w) + broadcast_in_dim(b, {rows, width}, {1});
}

Value loss(const std::vector<Value>& p, const Value& x, const Value& y) {
  Value h = tanh(layer(x, p[0], p[1]));
  h = tanh(layer(h, p[2], p[3]));
  Value err = layer(h, p[4], p[5]) - y;
  return reduce_sum(err * err) / static_cast<float>(kRows);
}

// The step: each gradient summed over "data" by a psum of its own, then an SGD update.
std::vector<Value> step(const std::vector<Value>& p, const Value& x, const Value& y) {
  std::vector<Value> g = grad(loss)(p, x, y);
  std::vector<Value> out;
  for (size_t k = 0; k < p.size(); ++k) out.push_back(p[k] - psum(g[k], "data") * 0.05f);
  return out;
}

using Step = decltype(jit(step, JitOptions{}));

// A jitted step, compiled now with the overlap-sums pass on or off.
Step compiled(bool overlap, const std::vector<Value>& p, const Value& x, const Value& y) {
  setenv("REFJIT_OVERLAP_SUMS", overlap ? "1" : "0", 1);
  Step s = jit(step, JitOptions{.tier = Tier::optimized, .name = "dp_step"});
  s(p, x, y);
  unsetenv("REFJIT_OVERLAP_SUMS");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  distributed::Session mpi(argc, argv);
  const int rank = distributed::rank();
  const distributed::Communicator world = distributed::Communicator::world();
  const distributed::Communicator self = world.split(rank, 0);
  std::vector<int64_t> widths;
  for (int i = 1; i < argc; ++i) widths.push_back(std::atoll(argv[i]));
  if (widths.empty()) widths = {64, 256, 512};
  if (rank == 0)
    std::printf("%d processes, %lld rows each\n%6s %10s %10s %10s %10s %10s\n", world.size(),
                static_cast<long long>(kRows), "width", "params", "alone us", "in line",
                "overlapped", "hidden");
  for (int64_t width : widths) {
    const std::vector<Value> p = {Value(pattern({kFeatures, width}, 0.25f, 1)),
                                  Value(pattern({width}, 0.1f, 2)),
                                  Value(pattern({width, width}, 0.5f / std::sqrt(width), 3)),
                                  Value(pattern({width}, 0.1f, 4)),
                                  Value(pattern({width, 1}, 0.5f / std::sqrt(width), 5)),
                                  Value(pattern({1}, 0.1f, 6))};
    const Value x(pattern({kRows, kFeatures}, 1.0f, 10 + rank));
    const Value y(pattern({kRows, 1}, 1.0f, 20 + rank));
    int64_t params = 0;
    for (const Value& v : p) params += v.array().size();

    distributed::bind_axis("data", self);
    Step alone = compiled(true, p, x, y);
    distributed::bind_axis("data", world);
    Step in_line = compiled(false, p, x, y);
    Step overlapped = compiled(true, p, x, y);

    const int reps = width >= 512 ? 20 : 100;
    std::vector<double> t[3];
    for (int round = 0; round < 9; ++round) {
      Step* steps[3] = {&alone, &in_line, &overlapped};
      for (int j = 0; j < 3; ++j) {
        const int k = (round + j) % 3;  // each goes first, second and third alike
        distributed::bind_axis("data", k == 0 ? self : world);
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r) (*steps[k])(p, x, y);
        t[k].push_back(1e6 * std::chrono::duration<double>(Clock::now() - t0).count() / reps);
      }
    }
    double median[3];
    for (int k = 0; k < 3; ++k) {
      std::sort(t[k].begin(), t[k].end());
      median[k] = t[k][t[k].size() / 2];
    }
    // The share of the sums' time (in line minus alone) that the overlap hid.
    const double sums = median[1] - median[0];
    // (Not shown when the sums take under 5% of the step: one process, or noise.)
    const std::string hidden = sums > 0.05 * median[0]
                                   ? fmt::format("{:.0f}%", 100.0 * (median[1] - median[2]) / sums)
                                   : std::string("-");
    if (rank == 0)
      std::printf("%6lld %10lld %10.1f %10.1f %10.1f %10s\n", static_cast<long long>(width),
                  static_cast<long long>(params), median[0], median[1], median[2], hidden.c_str());
  }
  return 0;
}
