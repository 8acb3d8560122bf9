// refjit_bench_allreduce: the in-place psum of a ref (refjit's ordered sum over MPI) against
// MPI_Allreduce on the same buffer, per size, under mpirun (docs/distributed.md):
//   mpirun -np 2 build/release/bench/refjit_bench_allreduce
// Prints one row per size on rank 0: microseconds per allreduce for each, and their ratio.
#include <mpi.h>
#include <refjit/distributed.h>
#include <refjit/refjit.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

using namespace refjit;

namespace {

using Clock = std::chrono::steady_clock;

// The median of `runs` timings of `reps` back-to-back calls of f, per call, in microseconds.
template <class F>
double median_us(int runs, int reps, F f) {
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    f();
    t.push_back(1e6 * std::chrono::duration<double>(Clock::now() - t0).count() / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  distributed::Session mpi(argc, argv);
  const int rank = distributed::rank();
  if (rank == 0)
    std::printf("%d processes\n%10s %14s %14s %8s\n", distributed::size(), "floats",
                "refjit psum us", "MPI_Allreduce", "ratio");
  for (int64_t n = 1 << 10; n <= (1 << 22); n *= 4) {
    const int reps = n >= (1 << 20) ? 5 : 50;
    Ref g = new_ref(zeros({n}));
    auto loop = jit(
        [reps](Ref g) {
          foreach (arange(reps)) ([&](Value) { psum(g, "data"); });
        },
        "allreduce_loop");
    loop(g);  // compile
    const double ours = median_us(7, reps, [&] { loop(g); });
    std::vector<float> buf(static_cast<size_t>(n), 1.0f);
    const double mpi_us = median_us(7, reps, [&] {
      for (int k = 0; k < reps; ++k)
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
    });
    if (rank == 0)
      std::printf("%10lld %14.1f %14.1f %8.2f\n", static_cast<long long>(n), ours, mpi_us,
                  ours / mpi_us);
  }
  return 0;
}
