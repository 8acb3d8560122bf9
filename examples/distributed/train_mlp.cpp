// Data-parallel training of a small MLP over MPI (docs/distributed.md). Every rank holds the
// same parameters and its shard of a fixed, seeded data set. One training step, compiled once:
// the rank's microbatches accumulate their gradients into gradient refs in place, the refs are
// summed over the ranks in place (psum of a ref: MPI, no copy), and every rank takes the same
// SGD step. The sums run in rank order, so 1 and 2 ranks train the same model up to float
// rounding.
//
//   mpirun -np 2 build/release/examples/distributed/train_mlp    (scripts/distributed.sh 2)
//
// The last line is `checksum` and the sums of the trained parameters.
#include <refjit/distributed.h>
#include <refjit/refjit.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

using namespace refjit;

namespace {

constexpr int kExamples = 1024;  // the whole data set, split over the ranks
constexpr int kFeatures = 16;
constexpr int kHidden = 64;
constexpr int kMicrobatch = 32;
constexpr int kSteps = 30;
constexpr float kLearningRate = 0.05f;

// The data set: x uniform in [-1, 1) from a fixed linear congruential generator, and the
// target y = sin(3 x0) + x1 x2 - 0.5 x3 (the same on every machine and for every rank count).
struct DataSet {
  std::vector<float> x, y;
};

DataSet make_data() {
  DataSet d;
  uint64_t s = 0x2545F4914F6CDD1DULL;
  auto uniform = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((s >> 40) * (1.0 / (1ULL << 24))) * 2.0f - 1.0f;
  };
  for (int i = 0; i < kExamples; ++i) {
    float f[kFeatures];
    for (float& v : f) v = uniform();
    d.x.insert(d.x.end(), f, f + kFeatures);
    d.y.push_back(std::sin(3 * f[0]) + f[1] * f[2] - 0.5f * f[3]);
  }
  return d;
}

// Parameters start the same on every rank: a fixed pattern scaled for the layer's width.
Array initial(const Shape& shape, float scale, int salt) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * std::sin(0.37f * static_cast<float>(i) + salt);
  return Array::from_vector<float>(v, shape);
}

Value loss(const Value& w1, const Value& b1, const Value& w2, const Value& b2, const Value& x,
           const Value& y) {
  Value h = tanh(matmul(x, w1) + broadcast_in_dim(b1, {kMicrobatch, kHidden}, {1}));
  Value err = reshape(matmul(h, w2), {kMicrobatch}) + b2 - y;
  return reduce_sum(err * err);
}

}  // namespace

int main(int argc, char** argv) {
  distributed::Session mpi(argc, argv);
  try {
    const int rank = distributed::rank(), ranks = distributed::size();
    if (kExamples % (ranks * kMicrobatch) != 0) {
      std::fprintf(stderr,
                   "train_mlp: %d examples do not split into %d ranks of %d-example "
                   "microbatches\n",
                   kExamples, ranks, kMicrobatch);
      return 2;
    }
    const int per_rank = kExamples / ranks, micro = per_rank / kMicrobatch;
    const DataSet data = make_data();
    // This rank's shard, as [microbatches, microbatch, ...].
    const auto first_x = data.x.begin() + rank * per_rank * kFeatures;
    const auto first_y = data.y.begin() + rank * per_rank;
    const Value xs(
        Array::from_vector<float>(std::vector<float>(first_x, first_x + per_rank * kFeatures),
                                  {micro, kMicrobatch, kFeatures}));
    const Value ys(Array::from_vector<float>(std::vector<float>(first_y, first_y + per_rank),
                                             {micro, kMicrobatch}));

    Ref w1 = new_ref(Value(initial({kFeatures, kHidden}, 0.4f, 1)));
    Ref b1 = new_ref(Value(initial({kHidden}, 0.1f, 2)));
    Ref w2 = new_ref(Value(initial({kHidden, 1}, 0.2f, 3)));
    Ref b2 = new_ref(Value(initial({}, 0.1f, 4)));

    auto step = jit(
        [](Ref w1, Ref b1, Ref w2, Ref b2, Value xs, Value ys) {
          // One gradient buffer per parameter, accumulated in place over the microbatches.
          Ref g1 = new_ref(zeros_like(w1.get())), gb1 = new_ref(zeros_like(b1.get()));
          Ref g2 = new_ref(zeros_like(w2.get())), gb2 = new_ref(zeros_like(b2.get()));
          Ref total = new_ref(0.0f);
          foreach (xs, ys)
            ([&](Value x, Value y) {
              auto [l, g] =
                  value_and_grad<0, 1, 2, 3>(loss)(w1.get(), b1.get(), w2.get(), b2.get(), x, y);
              g1[ellipsis] += std::get<0>(g);
              gb1[ellipsis] += std::get<1>(g);
              g2[ellipsis] += std::get<2>(g);
              gb2[ellipsis] += std::get<3>(g);
              total[ellipsis] += l;
            });
          // The sum over every rank's examples, in each rank's own buffers.
          for (const Ref& g : {g1, gb1, g2, gb2, total}) psum(g, "data");
          const float scale = -kLearningRate / kExamples;
          w1[ellipsis] += g1.get() * scale;
          b1[ellipsis] += gb1.get() * scale;
          w2[ellipsis] += g2.get() * scale;
          b2[ellipsis] += gb2.get() * scale;
          return freeze(total) / static_cast<float>(kExamples);
        },
        "train_step");

    using Clock = std::chrono::steady_clock;
    // The first steps compile the step (a fast tier, then optimized code in the background);
    // the time is that of the steps after kWarmSteps.
    constexpr int kWarmSteps = 10;
    double first_loss = 0, last_loss = 0, step_seconds = 0;
    for (int s = 0; s < kSteps; ++s) {
      const auto t0 = Clock::now();
      const double l = step(w1, b1, w2, b2, xs, ys).item();
      if (s >= kWarmSteps) step_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      if (s == 0) first_loss = l;
      last_loss = l;
    }
    // The cost model's other half: an in-place allreduce alone, of the gradient's size and of
    // 4 MB (docs/distributed.md).
    std::vector<std::pair<int64_t, double>> allreduce_us;
    for (int64_t n : {int64_t{kFeatures * kHidden + 2 * kHidden + 1}, int64_t{1} << 20}) {
      constexpr int kReps = 50;
      Ref g = new_ref(zeros({n}));
      // kReps allreduces in one compiled loop, so the time is the collective's, not the call's.
      auto allreduce = jit(
          [](Ref g) {
            foreach (arange(kReps)) ([&](Value) { psum(g, "data"); });
          },
          "allreduce");
      for (int warm = 0; warm < 3; ++warm) allreduce(g);  // compile, tier up
      const auto t0 = Clock::now();
      allreduce(g);
      allreduce_us.emplace_back(
          n, 1e6 * std::chrono::duration<double>(Clock::now() - t0).count() / kReps);
    }
    if (rank == 0) {
      for (auto [n, us] : allreduce_us)
        std::printf("allreduce of %lld floats: %.1f us\n", static_cast<long long>(n), us);
      std::printf("ranks %d, %d examples each, %d steps: loss %.6f -> %.6f\n", ranks, per_rank,
                  kSteps, first_loss, last_loss);
      std::printf("step time %.3f ms (mean of steps %d..%d, rank 0)\n",
                  1e3 * step_seconds / (kSteps - kWarmSteps), kWarmSteps + 1, kSteps);
      auto sum = [](const Ref& r) { return reduce_sum(Value(r.value())).item(); };
      std::printf("checksum %.6f %.6f %.6f %.6f\n", sum(w1), sum(b1), sum(w2), sum(b2));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp (rank %d): error: %s\n", distributed::rank(), e.what());
    return 1;
  }
}
