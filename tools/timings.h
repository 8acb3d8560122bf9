// Per-stage wall-clock times for `--timings` (printed on standard error).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace refjit::cli {

class StageTimings {
 public:
  // Runs f(), recording its wall time under `stage`; returns what f returns.
  template <class F>
  decltype(auto) time(std::string stage, F&& f) {
    auto start = std::chrono::steady_clock::now();
    struct Record {  // records on every exit path, including exceptions
      StageTimings* self;
      std::string stage;
      std::chrono::steady_clock::time_point start;
      ~Record() {
        std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
        self->stages_.emplace_back(std::move(stage), ms.count());
      }
    } record{this, std::move(stage), start};
    return std::forward<F>(f)();
  }

  // Records a time measured elsewhere (e.g. the backend's own per-stage timings).
  void record(std::string stage, double ms) { stages_.emplace_back(std::move(stage), ms); }

  const std::vector<std::pair<std::string, double>>& stages() const { return stages_; }

  // One line per stage, then the total: `timing: parse 0.412 ms`.
  void print(std::FILE* out) const;

 private:
  std::vector<std::pair<std::string, double>> stages_;
};

}  // namespace refjit::cli
