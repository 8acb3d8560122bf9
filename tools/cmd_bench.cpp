// `refjit bench [OPTIONS] FILE [VALUE...]`: time a program's calls. The VALUEs not given are
// seeded random data of the binders' types, so `refjit bench FILE` times any program.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tools/autodiff.h"
#include "tools/background_load.h"
#include "tools/commands.h"
#include "tools/execute.h"
#include "tools/program.h"
#include "tools/values.h"

namespace refjit::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string_view mode_name(const Options& o) {
  if (o.grad) return "grad";
  if (o.jvp) return "jvp";
  return "forward";
}

// The given VALUEs for the first slots, seeded random data for the rest.
std::vector<RtValue> bench_arguments(const std::vector<ValueSlot>& slots, const Options& o) {
  if (o.values.size() > slots.size()) return parse_values(slots, o.values);  // throws: too many
  std::vector<RtValue> args =
      parse_values(std::span(slots).first(o.values.size()), std::span(o.values));
  std::mt19937_64 rng(o.seed);
  for (size_t i = o.values.size(); i < slots.size(); ++i)
    args.push_back(random_value(slots[i], rng));
  return args;
}

// A JSON string literal (file names may hold quotes or backslashes).
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

int bench_command(const Options& o, StageTimings& timings) {
  Source source = read_source(o.file);
  Jaxpr program = load_program(source, o, timings);
  PipelineOptions pipeline = pipeline_options(o, program);
  pipeline.compile.opt_level = o.tier == "fast" ? 0 : 3;
  Executable executable(program, o, pipeline, timings);

  std::vector<ValueSlot> slots = argument_slots(program, o.jvp);
  std::vector<RtValue> args = bench_arguments(slots, o);

  // Compile time: from the program as read to callable machine code (every pass).
  auto t0 = Clock::now();
  Executable::Call call = executable.prepare(args, timings);
  const double compile_ms = ms_since(t0);

  const BackgroundLoad load(o.background_load);  // from the warm-up to the last timed call
  (void)call(args);  // warm-up: first touch of the buffers, lazy binding
  // At least --runs calls, and more until they took --min-time: a short call's median over a
  // fixed count can fall entirely inside a burst of another process's (or the host's) load.
  std::vector<double> times;
  times.reserve(static_cast<size_t>(o.runs));
  double total_ms = 0;
  while (static_cast<int64_t>(times.size()) < o.runs ||
         (total_ms < static_cast<double>(o.min_time_ms) && times.size() < 10000000)) {
    auto start = Clock::now();
    (void)call(args);
    times.push_back(ms_since(start));
    total_ms += times.back();
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  const std::string tier = o.interpret ? "interpreter" : o.tier;

  std::string out;
  if (o.json) {
    out = fmt::format(
        "{{\"file\": {}, \"mode\": \"{}\", \"tier\": \"{}\", \"runs\": {}, "
        "\"compile_ms\": {:.3f}, \"median_ms\": {:.6f}, \"min_ms\": {:.6f}{}}}\n",
        json_string(source.name), mode_name(o), tier, n, compile_ms, median, times.front(),
        o.background_load ? fmt::format(", \"background_load\": {}", o.background_load) : "");
  } else {
    out = fmt::format(
        "{} {} ({}), {} runs{}\n", source.name, mode_name(o), tier, n,
        o.background_load ? fmt::format(", {} busy processes alongside", o.background_load) : "");
    out += fmt::format("compile {:12.3f} ms\n", compile_ms);
    out += fmt::format("median  {:12.6f} ms\n", median);
    out += fmt::format("min     {:12.6f} ms\n", times.front());
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace refjit::cli
