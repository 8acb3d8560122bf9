// refjit_bench_seed: the seed "grad-scan-slice-update-slow" as a benchmark (docs/benchmarks.md).
//
//   refjit_bench_seed [--runs N] [--rounds K] [--json OUT] [--repeats 1,10]
//                     [--max-seconds S] [--timeout S] [--no-fork]
//
// Part 1: loss_fn with the insert modes slice1/slice2/scatter/combo1/combo2 (plus delete_fn),
//         forward, grad (vjp) and jvp, for each N_ROW_REPEATS.
// Part 2: the seed's simple/bad/slow/fast_insert programs, forward and grad.
// Part 3: slow_pop vs fast_pop, no grad.
// Plus the hand-written forward and adjoint of slice1 (bench/handwritten_slice1.h), the
// physical limit, and of the insert-only program of part 2.
//
// Every row is a ready function called repeatedly: the first call traces and compiles
// (reported separately), one more call warms up, then the median of N timed calls. The whole
// list of rows is measured K times in turn (rounds, default 5) and each row reports its median
// round: on a shared VM the machine is sometimes slower for a few seconds, for the
// hand-written code as much as for refjit's, and rounds minutes apart keep such a burst from
// deciding a row. Each measurement runs in a child process (unless --no-fork), so a crash or a
// hang in one program is reported as "n/a (reason)" and the others still run; nothing is
// estimated or filled in.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/handwritten_slice1.h"
#include "refjit/refjit.h"

#if __has_include("bench/seed_programs.h")
#include "bench/seed_programs.h"
#define REFJIT_HAVE_SEED_PROGRAMS 1
#else
#define REFJIT_HAVE_SEED_PROGRAMS 0
#endif

namespace refjit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Options {
  int runs = 10;
  double max_seconds = 20;  // per row: stop timing after this (at least 3 runs)
  int timeout_seconds = 600;
  std::string json;
  std::vector<int64_t> repeats{1, 10};
  bool fork = true;
  int rounds = 5;  // sweeps over all rows; a row reports its median round
};

// What one measured call returns: the scalar the seed prints (a loss or a gradient) and a
// digest of array results, for exact comparisons between rows (part 3).
struct CallResult {
  double value = NAN;
  uint64_t digest = 0;
};

struct Measurement {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
  double first_call_ms = 0;  // trace + compile + one run
  double compile_ms = -1;    // refjit's own compile stages (trace .. codegen); -1: none
  // The same compile again in the same process (after clear_compile_cache): without the
  // process's one-time costs (binding LLVM's symbols, paging its code in); -1: none.
  double recompile_ms = -1;
  CallResult result;
};

struct Row {
  std::string part;     // "loss_fn", "insert", "pop"
  std::string program;  // "slice1", ..., "handwritten_slice1"
  std::string variant;  // "forward", "grad", "jvp"
  int64_t repeats = 1;  // N_ROW_REPEATS
  std::optional<Measurement> m;
  std::string na;  // why there is no measurement
};

// Times `call` (returning CallResult): first call, one warm-up, then up to o.runs calls.
template <class Call>
Measurement time_calls(Call&& call, const Options& o) {
  Measurement m;
  auto t0 = Clock::now();
  m.result = call();
  m.first_call_ms = ms_since(t0);
  call();
  std::vector<double> ms;
  auto start = Clock::now();
  for (int i = 0; i < o.runs; ++i) {
    auto t = Clock::now();
    call();
    ms.push_back(ms_since(t));
    if (i >= 2 && ms_since(start) > o.max_seconds * 1000) break;
  }
  std::sort(ms.begin(), ms.end());
  m.runs = static_cast<int>(ms.size());
  m.min_ms = ms.front();
  m.median_ms = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  return m;
}

uint64_t fnv1a(const std::byte* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint64_t>(p[i])) * 1099511628211ull;
  return h;
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 300 ? line.substr(0, 297) + "..." : line;
}

// Runs `measure` in a child process (so that a crash or hang in the program under test only
// costs its row) and fills the row from what the child reports through a pipe.
void run_row(Row& row, const std::function<Measurement()>& measure, const Options& o) {
  if (!o.fork) {
    try {
      row.m = measure();
    } catch (const std::exception& e) {
      row.na = first_line(e.what());
    }
    return;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    row.na = "pipe() failed";
    return;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    row.na = "fork() failed";
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(o.timeout_seconds));
    std::string msg;
    try {
      Measurement m = measure();
      msg = fmt::format("OK {:.17g} {:.17g} {} {:.17g} {:.17g} {:.17g} {:.17g} {}", m.median_ms,
                        m.min_ms, m.runs, m.first_call_ms, m.compile_ms, m.recompile_ms,
                        m.result.value, m.result.digest);
    } catch (const std::exception& e) {
      msg = "NA " + first_line(e.what());
    }
    ssize_t written = write(fds[1], msg.data(), msg.size());
    (void)written;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    row.na = sig == SIGALRM ? fmt::format("timed out after {} s", o.timeout_seconds)
                            : fmt::format("crashed ({})", strsignal(sig));
    return;
  }
  std::istringstream in(msg);
  std::string tag;
  in >> tag;
  if (tag == "OK") {
    Measurement m;
    in >> m.median_ms >> m.min_ms >> m.runs >> m.first_call_ms >> m.compile_ms >> m.recompile_ms >>
        m.result.value >> m.result.digest;
    row.m = m;
  } else if (tag == "NA") {
    std::getline(in >> std::ws, row.na);
  } else {
    row.na = "the child process reported nothing";
  }
}

// ---------------------------------------------------------------------------------------
// Inputs as refjit Values.

Value f32_value(const std::vector<float>& v, Shape shape) {
  return Value(Array(ArrayType{DType::f32, std::move(shape)}, v.data()));
}
Value i32_value(const std::vector<int32_t>& v, Shape shape) {
  return Value(Array(ArrayType{DType::i32, std::move(shape)}, v.data()));
}

double scalar_of(const Value& v) { return v.item(); }

// A ready jit function called on w = 2 (as the seed does): `scalar` turns its result into
// the CallResult.
template <class J, class Extract>
Measurement measure_jitted(const J& f, Extract extract, const Options& o) {
  Measurement m = time_calls([&] { return extract(f(Value(2.0f))); }, o);
  const CompileStageTimings t = f.last_compile_timings();
  if (t.opt_level >= 0) m.compile_ms = t.total_ms();
  clear_compile_cache();
  (void)extract(f(Value(2.0f)));
  const CompileStageTimings again = f.last_compile_timings();
  if (again.opt_level >= 0) m.recompile_ms = again.total_ms();
  return m;
}

JitOptions bench_jit(const std::string& name) {
  // The optimising tier from the first call: the timed calls never see the -O0 code.
  return JitOptions{.backend = Backend::native, .tier = Tier::optimized, .name = name};
}

[[maybe_unused]] const char* kNoSeedPrograms = "bench/seed_programs.h is not in the tree yet";

// ---------------------------------------------------------------------------------------
// Part 1: loss_fn.

const std::vector<std::string> kModes = {"slice1", "slice2", "scatter", "combo1", "combo2"};

#if REFJIT_HAVE_SEED_PROGRAMS
seeds::InsertMode mode_of(const std::string& name) {
  for (seeds::InsertMode m : seeds::kInsertModes)
    if (name == seeds::mode_name(m)) return m;
  throw Error(fmt::format("unknown insert mode '{}'", name));
}

// The seed's partial(loss_fn, mode=mode, **inputs) on the seed's own data (NumPy's stream).
auto loss_of_w(const ShiftProgram& p, const SeedSizes& s, const std::string& mode) {
  seeds::Part1Inputs in{f32_value(p.init_state, {p.state_rows, p.state_cols}),
                        f32_value(p.target_state, {p.loss_rows, p.loss_cols}),
                        i32_value(p.row_indices(), {p.n_steps(), 2}),
                        i32_value(p.col_indices(), {p.n_steps(), 2}),
                        f32_value(p.insert_values, {p.n_steps()})};
  seeds::Part1Sizes sizes{.n_steps = s.n_steps,
                          .n_rows = s.n_rows,
                          .n_cols = s.n_cols,
                          .n_row_repeats = s.n_row_repeats};
  return seeds::make_loss(mode_of(mode), std::move(in), sizes);
}
#endif

Measurement measure_loss_fn(const ShiftProgram& p, const SeedSizes& s, const std::string& mode,
                            const std::string& variant, const Options& o) {
#if REFJIT_HAVE_SEED_PROGRAMS
  auto loss = loss_of_w(p, s, mode);
  auto scalar = [](const Value& v) { return CallResult{scalar_of(v), 0}; };
  if (variant == "forward") return measure_jitted(jit(loss, bench_jit("loss_" + mode)), scalar, o);
  if (variant == "grad")
    return measure_jitted(jit([loss](Value w) { return grad(loss)(w); }, bench_jit("grad_" + mode)),
                          scalar, o);
  auto jvp_fn = jit(
      [loss](Value w) {
        auto [y, y_dot] = jvp(loss, std::tuple{w}, std::tuple{Value(1.0f)});
        return std::pair{y, y_dot};
      },
      bench_jit("jvp_" + mode));
  return measure_jitted(
      jvp_fn,
      [](const std::pair<Value, Value>& r) {
        return CallResult{scalar_of(r.second), 0};
      },
      o);
#else
  (void)p, (void)s, (void)mode, (void)variant, (void)o;
  throw Error(kNoSeedPrograms);
#endif
}

Measurement measure_handwritten(const ShiftProgram& p, const std::string& variant,
                                const Options& o) {
  HandwrittenSlice1 hw(p);
  if (variant == "forward") return time_calls([&] { return CallResult{hw.forward(2.0f), 0}; }, o);
  return time_calls([&] { return CallResult{hw.value_and_grad(2.0f).grad, 0}; }, o);
}

// ---------------------------------------------------------------------------------------
// Part 2: simple/bad/slow/fast_insert.

const std::vector<std::string> kInsertFns = {"simple_insert", "bad_insert", "slow_insert",
                                             "fast_insert"};

Measurement measure_insert(const ShiftProgram& p, const std::string& fn, const std::string& variant,
                           const Options& o) {
#if REFJIT_HAVE_SEED_PROGRAMS
  std::optional<seeds::InsertFn> which;
  for (seeds::InsertFn f : seeds::kInsertFns)
    if (fn == seeds::fn_name(f)) which = f;
  if (!which) throw Error(fmt::format("unknown insert function '{}'", fn));
  seeds::Part2Inputs in{f32_value(p.init_state, {p.state_rows, p.state_cols}),
                        f32_value(p.target_state, {p.loss_rows, p.loss_cols}),
                        i32_value(p.insert_rows, {p.n_steps()}),
                        i32_value(p.insert_cols, {p.n_steps()}),
                        f32_value(p.insert_values, {p.n_steps()})};
  auto loss = seeds::make_part2_loss(
      *which, std::move(in),
      seeds::Part2Sizes{.n_steps = p.n_steps(), .n_rows = p.loss_rows, .n_cols = p.n_cols});
  auto scalar = [](const Value& v) { return CallResult{scalar_of(v), 0}; };
  if (variant == "forward") return measure_jitted(jit(loss, bench_jit("loss_" + fn)), scalar, o);
  return measure_jitted(jit([loss](Value w) { return grad(loss)(w); }, bench_jit("grad_" + fn)),
                        scalar, o);
#else
  (void)p, (void)fn, (void)variant, (void)o;
  throw Error(kNoSeedPrograms);
#endif
}

// ---------------------------------------------------------------------------------------
// Part 3: slow_pop vs fast_pop.

struct PopData {
  int64_t n_rows, n_cols, n_steps;
  std::vector<float> init_state;  // n_rows x (2 n_cols + 1)
  std::vector<int32_t> rows, cols;
};

// The seed's third program: np.random.seed(42), init_state, rows, cols.
PopData make_pop_data(const SeedSizes& s) {
  NumpyLegacyRandom rng(42);
  PopData d{s.n_rows, s.n_cols, s.n_steps, {}, {}, {}};
  d.init_state = rng.random_f32(s.n_rows * (2 * s.n_cols + 1));
  d.rows = rng.randint_i32(0, static_cast<int32_t>(s.n_rows), s.n_steps);
  d.cols = rng.randint_i32(0, static_cast<int32_t>(s.n_cols), s.n_steps);
  return d;
}

// A digest of the popped values and of state[:, :-1] (the seed compares exactly these).
[[maybe_unused]] uint64_t pop_digest(const Value& state, const Value& out) {
  Array s = state.array();
  Array y = out.array();
  const int64_t width = s.shape()[1];
  uint64_t h = fnv1a(y.data(), static_cast<size_t>(y.byte_size()));
  const size_t row_bytes = static_cast<size_t>(width - 1) * sizeof(float);
  for (int64_t r = 0; r < s.shape()[0]; ++r)
    h = fnv1a(s.data() + r * width * static_cast<int64_t>(sizeof(float)), row_bytes, h);
  return h;
}

Measurement measure_pop(const PopData& d, const std::string& fn, const Options& o) {
#if REFJIT_HAVE_SEED_PROGRAMS
  Value init = f32_value(d.init_state, {d.n_rows, 2 * d.n_cols + 1});
  Value rows = i32_value(d.rows, {d.n_steps});
  Value cols = i32_value(d.cols, {d.n_steps});
  const int64_t n_cols = d.n_cols;
  auto scan_fn = jit(
      [=](Value state) {
        return seeds::pop_scan(fn == "slow_pop" ? seeds::PopFn::slow_pop : seeds::PopFn::fast_pop,
                               state, rows, cols, n_cols);
      },
      bench_jit(fn));
  Measurement m = time_calls(
      [&] {
        auto [state, out] = scan_fn(init);
        return CallResult{NAN, pop_digest(state, out)};
      },
      o);
  const CompileStageTimings t = scan_fn.last_compile_timings();
  if (t.opt_level >= 0) m.compile_ms = t.total_ms();
  return m;
#else
  (void)d, (void)fn, (void)o;
  throw Error(kNoSeedPrograms);
#endif
}

// ---------------------------------------------------------------------------------------
// Report.

// The seed's JAX numbers (seconds -> ms; jax 0.4.14, CPU, unknown machine).
struct JaxSeed {
  double forward, grad, jvp;
};
const std::map<std::pair<std::string, int64_t>, JaxSeed> kJaxSeed = {
    {{"slice1", 1}, {0.46, 54.05, 55.25}},      {{"slice2", 1}, {0.42, 88.86, 52.00}},
    {{"scatter", 1}, {5.92, 67.49, 12.05}},     {{"combo1", 1}, {0.41, 88.41, 52.08}},
    {{"combo2", 1}, {0.42, 88.25, 0.82}},       {{"slice1", 10}, {0.60, 1086.82, 1126.66}},
    {{"slice2", 10}, {0.54, 1622.56, 1207.84}}, {{"scatter", 10}, {6.03, 1209.57, 11.41}},
    {{"combo1", 10}, {0.48, 2237.81, 1433.95}}, {{"combo2", 10}, {0.52, 1878.56, 1.60}},
    {{"simple_insert", 1}, {0.29, 27.32, NAN}}, {{"bad_insert", 1}, {0.29, 0.30, NAN}},
    {{"slow_insert", 1}, {0.29, 50.66, NAN}},   {{"fast_insert", 1}, {0.30, 0.44, NAN}},
    {{"slow_pop", 1}, {53.14, NAN, NAN}},       {{"fast_pop", 1}, {0.86, NAN, NAN}},
};

class Report {
 public:
  explicit Report(std::vector<Row> rows) : rows_(std::move(rows)) {}

  const Row* find(const std::string& program, const std::string& variant, int64_t r) const {
    for (const Row& row : rows_)
      if (row.program == program && row.variant == variant && row.repeats == r) return &row;
    return nullptr;
  }
  std::optional<double> median(const std::string& program, const std::string& variant,
                               int64_t r) const {
    const Row* row = find(program, variant, r);
    if (!row || !row->m) return std::nullopt;
    return row->m->median_ms;
  }
  std::optional<double> value(const std::string& program, const std::string& variant,
                              int64_t r) const {
    const Row* row = find(program, variant, r);
    if (!row || !row->m || std::isnan(row->m->result.value)) return std::nullopt;
    return row->m->result.value;
  }

  std::optional<double> ratio_value(const std::string& kind, const std::string& program,
                                    const std::string& variant, int64_t r) const {
    for (const auto& q : ratios_)
      if (q.kind == kind && q.program == program && q.variant == variant && q.repeats == r)
        return q.value;
    return std::nullopt;
  }

  struct Ratio {
    std::string kind, program, variant;
    int64_t repeats;
    double value;
  };
  struct Check {
    std::string program, variant;
    int64_t repeats;
    double value, reference;
    std::string reference_name;
    bool agrees, expected_to_agree;
  };

  void add_ratio(const std::string& kind, const std::string& program, const std::string& variant,
                 int64_t r, std::optional<double> num, std::optional<double> den) {
    if (num && den && *den > 0) ratios_.push_back({kind, program, variant, r, *num / *den});
  }
  void add_check(const std::string& program, const std::string& variant, int64_t r,
                 std::optional<double> v, std::optional<double> ref, const std::string& ref_name,
                 bool expected = true, double atol = 1e-8) {
    if (!v || !ref) return;
    // np.isclose(v, ref): |v - ref| <= atol + rtol * |ref|, rtol 1e-5, atol 1e-8 (for JAX's
    // printed values atol is half a unit of their last printed digit).
    const bool close = std::abs(*v - *ref) <= atol + 1e-5 * std::abs(*ref);
    checks_.push_back({program, variant, r, *v, *ref, ref_name, close, expected});
  }

  std::vector<Row> rows_;
  std::vector<Ratio> ratios_;
  std::vector<Check> checks_;
};

std::string cell(std::optional<double> v, int precision = 3) {
  if (!v || std::isnan(*v)) return "n/a";
  return fmt::format("{:.{}f}", *v, precision);
}

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (a && b && *b > 0) return *a / *b;
  return std::nullopt;
}

std::optional<double> jax(const std::string& program, int64_t r, double JaxSeed::*field) {
  auto it = kJaxSeed.find({program, r});
  if (it == kJaxSeed.end() || std::isnan(it->second.*field)) return std::nullopt;
  return it->second.*field;
}

void print_table(const Report& rep, const std::vector<std::string>& programs,
                 const std::vector<std::string>& variants, const std::vector<int64_t>& repeats) {
  std::string head = fmt::format("{:<20}{:>4}", "program", "R");
  for (const auto& v : variants) head += fmt::format("{:>12}", v + " ms");
  for (size_t k = 1; k < variants.size(); ++k) head += fmt::format("{:>12}", variants[k] + "/fwd");
  for (const auto& v : variants) head += fmt::format("{:>12}", "JAX " + v);
  fmt::print("{}\n", head);
  for (int64_t r : repeats)
    for (const auto& program : programs) {
      bool any = false;
      for (const auto& v : variants) any |= rep.find(program, v, r) != nullptr;
      if (!any) continue;
      std::string line = fmt::format("{:<20}{:>4}", program, r);
      for (const auto& v : variants) line += fmt::format("{:>12}", cell(rep.median(program, v, r)));
      for (size_t k = 1; k < variants.size(); ++k)
        line += fmt::format("{:>12}", cell(ratio(rep.median(program, variants[k], r),
                                                 rep.median(program, variants[0], r)),
                                           1));
      double JaxSeed::*fields[] = {&JaxSeed::forward, &JaxSeed::grad, &JaxSeed::jvp};
      for (size_t k = 0; k < variants.size() && k < 3; ++k)
        line += fmt::format("{:>12}", cell(jax(program, r, fields[k]), 2));
      fmt::print("{}\n", line);
    }
}

// A table of `get(program, variant, R)` for the given programs and repeats.
void print_grid(const Report& rep, const std::vector<std::string>& programs,
                const std::vector<std::string>& variants, const std::vector<int64_t>& repeats,
                const std::function<std::optional<double>(const std::string&, const std::string&,
                                                          int64_t)>& get,
                int precision = 2) {
  std::string head = fmt::format("{:<20}{:>4}", "program", "R");
  for (const auto& v : variants) head += fmt::format("{:>12}", v);
  fmt::print("{}\n", head);
  for (int64_t r : repeats)
    for (const auto& program : programs) {
      std::string line = fmt::format("{:<20}{:>4}", program, r);
      bool any = false;
      for (const auto& v : variants) {
        std::optional<double> x = get(program, v, r);
        any |= x.has_value();
        line += fmt::format("{:>12}", cell(x, precision));
      }
      if (any || rep.find(program, variants[0], r)) fmt::print("{}\n", line);
    }
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    else
      out += c;
  }
  return out;
}

std::string json_number(double v) {
  if (std::isnan(v) || std::isinf(v)) return "null";
  return fmt::format("{:.9g}", v);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void write_json(const Report& rep, const Options& o, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot write the JSON report to '{}'", path));
  out << "{\n";
  out << fmt::format("  \"benchmark\": \"seed grad-scan-slice-update-slow\",\n");
  out << fmt::format("  \"date\": \"{}\",\n", utc_now());
  out << fmt::format("  \"machine\": {{\"cpu\": \"{}\", \"hardware_threads\": {}}},\n",
                     json_escape(cpu_model()), std::thread::hardware_concurrency());
  out << fmt::format("  \"sizes\": {{\"n_steps\": 1000, \"n_rows\": 100, \"n_cols\": 500}},\n");
  out << fmt::format("  \"runs\": {},\n  \"rounds\": {},\n  \"w\": 2.0,\n", o.runs, o.rounds);
  out << "  \"rows\": [\n";
  for (size_t i = 0; i < rep.rows_.size(); ++i) {
    const Row& r = rep.rows_[i];
    out << fmt::format(
        "    {{\"part\": \"{}\", \"program\": \"{}\", \"variant\": \"{}\", \"n_row_repeats\": {}, ",
        r.part, r.program, r.variant, r.repeats);
    if (r.m)
      out << fmt::format(
          "\"median_ms\": {}, \"min_ms\": {}, \"runs\": {}, \"first_call_ms\": {}, "
          "\"compile_ms\": {}, \"recompile_ms\": {}, \"value\": {}}}",
          json_number(r.m->median_ms), json_number(r.m->min_ms), r.m->runs,
          json_number(r.m->first_call_ms),
          r.m->compile_ms < 0 ? "null" : json_number(r.m->compile_ms),
          r.m->recompile_ms < 0 ? "null" : json_number(r.m->recompile_ms),
          json_number(r.m->result.value));
    else
      out << fmt::format("\"median_ms\": null, \"na\": \"{}\"}}", json_escape(r.na));
    out << (i + 1 < rep.rows_.size() ? ",\n" : "\n");
  }
  out << "  ],\n  \"ratios\": [\n";
  for (size_t i = 0; i < rep.ratios_.size(); ++i) {
    const auto& q = rep.ratios_[i];
    out << fmt::format(
        "    {{\"kind\": \"{}\", \"program\": \"{}\", \"variant\": \"{}\", \"n_row_repeats\": {}, "
        "\"value\": {}}}{}\n",
        q.kind, q.program, q.variant, q.repeats, json_number(q.value),
        i + 1 < rep.ratios_.size() ? "," : "");
  }
  out << "  ],\n  \"gradient_checks\": [\n";
  for (size_t i = 0; i < rep.checks_.size(); ++i) {
    const auto& c = rep.checks_[i];
    out << fmt::format(
        "    {{\"program\": \"{}\", \"variant\": \"{}\", \"n_row_repeats\": {}, \"value\": {}, "
        "\"reference\": \"{}\", \"reference_value\": {}, \"agrees\": {}, "
        "\"expected_to_agree\": {}}}{}\n",
        c.program, c.variant, c.repeats, json_number(c.value), c.reference_name,
        json_number(c.reference), c.agrees, c.expected_to_agree,
        i + 1 < rep.checks_.size() ? "," : "");
  }
  out << "  ]\n}\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(fmt::format("{} needs a value", a));
      return argv[++i];
    };
    if (a == "--runs") {
      o.runs = std::max(3, std::stoi(next()));
    } else if (a == "--json") {
      o.json = next();
    } else if (a == "--max-seconds") {
      o.max_seconds = std::stod(next());
    } else if (a == "--timeout") {
      o.timeout_seconds = std::stoi(next());
    } else if (a == "--no-fork") {
      o.fork = false;
    } else if (a == "--rounds") {
      o.rounds = std::max(1, std::stoi(next()));
    } else if (a == "--repeats") {
      o.repeats.clear();
      std::stringstream ss(next());
      for (std::string x; std::getline(ss, x, ',');) o.repeats.push_back(std::stoll(x));
    } else if (a == "--help" || a == "-h") {
      fmt::print(
          "usage: refjit_bench_seed [--runs N] [--rounds K] [--json OUT] [--repeats 1,10] "
          "[--max-seconds S] [--timeout S] [--no-fork]\n");
      std::exit(0);
    } else {
      throw Error(fmt::format("unknown option '{}' (try --help)", a));
    }
  }
  return o;
}

// Keeps the CPU busy for `seconds` before the first row: on this VM the first process to run
// after a pause is measurably slower (clock ramp-up), which would land on whichever row
// happens to come first.
void warm_up(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  volatile uint64_t x = 1;
  while (Clock::now() < until)
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1;
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  warm_up(2.0);
  // Every row with its measurement, measured in rounds below.
  std::vector<std::pair<Row, std::function<Measurement()>>> pending;
  auto add = [&](std::string part, std::string program, std::string variant, int64_t r,
                 std::function<Measurement()> measure) {
    pending.emplace_back(
        Row{std::move(part), std::move(program), std::move(variant), r, std::nullopt, {}},
        std::move(measure));
  };

  for (int64_t r : o.repeats) {
    const SeedSizes s{.n_row_repeats = r};
    auto p = std::make_shared<const ShiftProgram>(make_loss_fn_program(s));
    for (const char* v : {"forward", "grad"})
      add("loss_fn", "handwritten_slice1", v, r,
          [p, v, &o] { return measure_handwritten(*p, v, o); });
    for (const auto& mode : kModes)
      for (const char* v : {"forward", "grad", "jvp"})
        add("loss_fn", mode, v, r,
            [p, s, mode, v, &o] { return measure_loss_fn(*p, s, mode, v, o); });
  }
  const ShiftProgram p2 = make_insert_program(SeedSizes{});
  for (const char* v : {"forward", "grad"})
    add("insert", "handwritten_insert", v, 1,
        [&p2, v, &o] { return measure_handwritten(p2, v, o); });
  for (const auto& fn : kInsertFns)
    for (const char* v : {"forward", "grad"})
      add("insert", fn, v, 1, [&p2, fn, v, &o] { return measure_insert(p2, fn, v, o); });
  const PopData pop = make_pop_data(SeedSizes{});
  for (const char* fn : {"slow_pop", "fast_pop"})
    add("pop", fn, "forward", 1, [&pop, fn, &o] { return measure_pop(pop, fn, o); });

  std::vector<std::vector<Measurement>> measured(pending.size());
  std::vector<std::string> failed(pending.size());
  for (int round = 1; round <= o.rounds; ++round) {
    fmt::print(stderr, "round {} of {}\n", round, o.rounds);
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!failed[i].empty()) continue;
      Row one = pending[i].first;
      std::fprintf(stderr, "  running %s %s %s R=%lld ...\n", one.part.c_str(), one.program.c_str(),
                   one.variant.c_str(), static_cast<long long>(one.repeats));
      run_row(one, pending[i].second, o);
      if (one.m)
        measured[i].push_back(*one.m);
      else
        failed[i] = one.na;
    }
  }
  std::vector<Row> rows;
  for (size_t i = 0; i < pending.size(); ++i) {
    Row row = pending[i].first;
    if (!failed[i].empty()) {
      row.na = failed[i];
    } else {
      std::vector<Measurement>& ms = measured[i];
      std::sort(ms.begin(), ms.end(), [](const Measurement& a, const Measurement& b) {
        return a.median_ms < b.median_ms;
      });
      row.m = ms[ms.size() / 2];
    }
    rows.push_back(std::move(row));
  }

  Report rep(std::move(rows));
  // Ratios.
  std::vector<std::string> part1 = kModes;
  part1.insert(part1.begin(), "handwritten_slice1");
  std::vector<std::string> part2 = kInsertFns;
  part2.insert(part2.begin(), "handwritten_insert");
  for (int64_t r : o.repeats)
    for (const auto& prog : part1)
      for (const char* v : {"grad", "jvp"})
        rep.add_ratio("grad/forward", prog, v, r, rep.median(prog, v, r),
                      rep.median(prog, "forward", r));
  for (const auto& prog : part2)
    rep.add_ratio("grad/forward", prog, "grad", 1, rep.median(prog, "grad", 1),
                  rep.median(prog, "forward", 1));
  for (int64_t r : o.repeats)
    for (const auto& mode : kModes) {
      rep.add_ratio("refjit/handwritten", mode, "forward", r, rep.median(mode, "forward", r),
                    rep.median("handwritten_slice1", "forward", r));
      for (const char* v : {"grad", "jvp"})
        rep.add_ratio("refjit/handwritten", mode, v, r, rep.median(mode, v, r),
                      rep.median("handwritten_slice1", "grad", r));
    }
  for (const auto& fn : kInsertFns)
    for (const char* v : {"forward", "grad"})
      rep.add_ratio("refjit/handwritten", fn, v, 1, rep.median(fn, v, 1),
                    rep.median("handwritten_insert", v, 1));
  if (std::find(o.repeats.begin(), o.repeats.end(), 1) != o.repeats.end() &&
      std::find(o.repeats.begin(), o.repeats.end(), 10) != o.repeats.end())
    for (const auto& prog : part1)
      for (const char* v : {"forward", "grad", "jvp"})
        rep.add_ratio("R10/R1", prog, v, 10, rep.median(prog, v, 10), rep.median(prog, v, 1));
  rep.add_ratio("slow_pop/fast_pop", "slow_pop", "forward", 1, rep.median("slow_pop", "forward", 1),
                rep.median("fast_pop", "forward", 1));
  // Gradient checks (np.isclose, as the seed): against the hand-written adjoint, and across
  // modes against the first mode's grad as the seed does.
  for (int64_t r : o.repeats)
    for (const auto& mode : kModes)
      for (const char* v : {"grad", "jvp"}) {
        rep.add_check(mode, v, r, rep.value(mode, v, r), rep.value("handwritten_slice1", "grad", r),
                      "handwritten_slice1");
        rep.add_check(mode, v, r, rep.value(mode, v, r), rep.value(kModes[0], "grad", r),
                      kModes[0] + " grad");
      }
  for (const auto& fn : kInsertFns) {
    const bool expected = fn != "bad_insert";  // the seed's bad_insert is wrong by design
    rep.add_check(fn, "grad", 1, rep.value(fn, "grad", 1),
                  rep.value("handwritten_insert", "grad", 1), "handwritten_insert", expected);
    rep.add_check(fn, "grad", 1, rep.value(fn, "grad", 1), rep.value(kInsertFns[0], "grad", 1),
                  kInsertFns[0] + " grad", expected);
  }  // The seed's printed gradients (its data is NumPy's stream, reproduced exactly here).
  for (int64_t r : o.repeats) {
    rep.add_check("handwritten_slice1", "grad", r, rep.value("handwritten_slice1", "grad", r),
                  0.00051642, "JAX printed", true, 0.5e-8);
    for (const auto& mode : kModes)
      rep.add_check(mode, "grad", r, rep.value(mode, "grad", r), 0.00051642, "JAX printed", true,
                    0.5e-8);
  }
  for (const auto& fn : kInsertFns) {
    const bool bad = fn == "bad_insert";
    rep.add_check(fn, "grad", 1, rep.value(fn, "grad", 1), bad ? 0.0017259 : 0.00052476,
                  bad ? "JAX printed (bad)" : "JAX printed", true, bad ? 0.5e-7 : 0.5e-8);
  }
  // Losses against the hand-written forward.
  for (int64_t r : o.repeats)
    for (const auto& mode : kModes)
      rep.add_check(mode, "forward", r, rep.value(mode, "forward", r),
                    rep.value("handwritten_slice1", "forward", r), "handwritten_slice1");
  for (const auto& fn : kInsertFns)
    rep.add_check(fn, "forward", 1, rep.value(fn, "forward", 1),
                  rep.value("handwritten_insert", "forward", 1), "handwritten_insert");

  // Print.
  fmt::print(
      "refjit seed benchmark (grad-scan-slice-update-slow), {} on {} ({} hardware threads)\n",
      utc_now(), cpu_model(), std::thread::hardware_concurrency());
  fmt::print(
      "median of up to {} calls of a ready function (the median of {} rounds), w = 2; JAX "
      "columns: the seed's own numbers (jax 0.4.14, CPU, another machine)\n\n",
      o.runs, o.rounds);
  fmt::print("Part 1: loss_fn (N_STEPS=1000, N_ROWS=100, N_COLS=500), R = N_ROW_REPEATS\n");
  print_table(rep, part1, {"forward", "grad", "jvp"}, o.repeats);
  fmt::print("\nPart 2: inserts (N_STEPS=1000, N_ROWS=100, N_COLS=500)\n");
  print_table(rep, part2, {"forward", "grad"}, {1});
  fmt::print("\nPart 3: pops (no grad)\n");
  print_table(rep, {"slow_pop", "fast_pop"}, {"forward"}, {1});
  fmt::print("\nRatio refjit / hand-written (grad and jvp over the hand-written grad)\n");
  print_grid(rep, kModes, {"forward", "grad", "jvp"}, o.repeats,
             [&](const std::string& prog, const std::string& v, int64_t r) {
               return rep.ratio_value("refjit/handwritten", prog, v, r);
             });
  print_grid(rep, kInsertFns, {"forward", "grad"}, {1},
             [&](const std::string& prog, const std::string& v, int64_t r) {
               return rep.ratio_value("refjit/handwritten", prog, v, r);
             });
  fmt::print("\nRatio R=10 / R=1\n");
  print_grid(rep, part1, {"forward", "grad", "jvp"}, {10},
             [&](const std::string& prog, const std::string& v, int64_t r) {
               return rep.ratio_value("R10/R1", prog, v, r);
             });
  fmt::print("\nRatio slow_pop / fast_pop: {}\n",
             cell(rep.ratio_value("slow_pop/fast_pop", "slow_pop", "forward", 1), 2));
  fmt::print("\nCompile ms (refjit's stages, trace to machine code)\n");
  // One compile table's cell: field `ms` of the row's measurement, when it was taken.
  auto compile_cell = [&](double Measurement::*ms) {
    return [&rep, ms](const std::string& prog, const std::string& v,
                      int64_t r) -> std::optional<double> {
      const Row* row = rep.find(prog, v, r);
      if (!row || !row->m || (*row->m).*ms < 0) return std::nullopt;
      return (*row->m).*ms;
    };
  };
  const auto compile_ms = compile_cell(&Measurement::compile_ms);
  print_grid(rep, kModes, {"forward", "grad", "jvp"}, o.repeats, compile_ms, 1);
  print_grid(rep, kInsertFns, {"forward", "grad"}, {1}, compile_ms, 1);
  print_grid(rep, {"slow_pop", "fast_pop"}, {"forward"}, {1}, compile_ms, 1);
  fmt::print(
      "\nCompile ms again, in the same process (without its first compile's one-time costs)\n");
  const auto recompile_ms = compile_cell(&Measurement::recompile_ms);
  print_grid(rep, kModes, {"forward", "grad", "jvp"}, o.repeats, recompile_ms, 1);
  print_grid(rep, kInsertFns, {"forward", "grad"}, {1}, recompile_ms, 1);

  fmt::print(
      "\nResults at w = 2 (np.isclose, rtol 1e-5, atol 1e-8; '-' = no such reference or no "
      "value)\n{:<20}{:>4} {:<8}{:>16}  {:<14}{:<14}{:<14}\n",
      "program", "R", "variant", "value", "hand-written", "first mode", "JAX printed");
  std::vector<std::tuple<std::string, std::string, int64_t>> keys;
  for (const auto& c : rep.checks_)
    if (std::find(keys.begin(), keys.end(), std::tuple{c.program, c.variant, c.repeats}) ==
        keys.end())
      keys.emplace_back(c.program, c.variant, c.repeats);
  auto variant_rank = [](const std::string& v) { return v == "grad" ? 0 : v == "jvp" ? 1 : 2; };
  // Ordered by R, then grad / jvp / forward, then first appearance.
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::tuple{std::get<2>(keys[x]), variant_rank(std::get<1>(keys[x])), x} <
           std::tuple{std::get<2>(keys[y]), variant_rank(std::get<1>(keys[y])), y};
  });
  for (size_t i : order) {
    const auto& [prog, variant, r] = keys[i];
    std::string verdict[3] = {"-", "-", "-"};
    double value = NAN;
    for (const auto& c : rep.checks_) {
      if (c.program != prog || c.variant != variant || c.repeats != r) continue;
      value = c.value;
      const int k = c.reference_name.rfind("handwritten", 0) == 0 ? 0
                    : c.reference_name.rfind("JAX", 0) == 0       ? 2
                                                                  : 1;
      verdict[k] = c.agrees ? "agrees" : "DISAGREES";
      if (!c.expected_to_agree) verdict[k] += c.agrees ? "(!)" : "(ok)";
    }
    fmt::print("{:<20}{:>4} {:<8}{:>16.9g}  {:<14}{:<14}{:<14}\n", prog, r, variant, value,
               verdict[0], verdict[1], verdict[2]);
  }
  fmt::print(
      "(ok): bad_insert's gradient is wrong by design and disagrees, as in the seed; "
      "(!): it should not agree\n");
  if (const Row* a = rep.find("slow_pop", "forward", 1); a && a->m)
    if (const Row* b = rep.find("fast_pop", "forward", 1); b && b->m)
      fmt::print("slow_pop and fast_pop: popped values and state[:, :-1] {}\n",
                 a->m->result.digest == b->m->result.digest ? "identical" : "DIFFER");
  bool any_na = false;
  for (const Row& row : rep.rows_)
    if (!row.m) {
      if (!any_na) fmt::print("\nNot measured\n");
      any_na = true;
      fmt::print("  {} {} R={}: n/a ({})\n", row.program, row.variant, row.repeats, row.na);
    }
  if (!o.json.empty()) {
    write_json(rep, o, o.json);
    fmt::print("\nwrote {}\n", o.json);
  }
  return 0;
}

}  // namespace
}  // namespace refjit::bench

int main(int argc, char** argv) {
  try {
    return refjit::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "refjit_bench_seed: %s\n", e.what());
    return 2;
  }
}
