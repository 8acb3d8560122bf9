#include "tools/execute.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "refjit/ir/error.h"

namespace refjit::cli {

namespace {

// Errors of the native backend point at the engine that covers every primitive. A program's
// own errors (a ref or type error, found by autodiff or a type rule; a derivative autodiff
// refuses) are the same on both engines and pass through unchanged.
template <class F>
auto native(F&& f) {
  try {
    return f();
  } catch (const RefError&) {
    throw;
  } catch (const TypeError&) {
    throw;
  } catch (const ReverseModeError&) {
    throw;
  } catch (const NotDifferentiableError&) {
    throw;
  } catch (const Error& e) {
    throw Error(
        fmt::format("{} (the native backend cannot compile this program; "
                    "`refjit run --interpret` runs it on the reference interpreter)",
                    e.what()));
  }
}

}  // namespace

Executable::Executable(const Jaxpr& program, const Options& options, PipelineOptions pipeline,
                       StageTimings& timings)
    : program_(program), pipeline_(std::move(pipeline)) {
  if (options.print_after_all)  // on standard error: standard output carries the results
    pipeline_.after_pass = [](const PassReport& r) {
      std::string text = r.text();
      if (!text.empty() && text.back() != '\n') text += '\n';
      std::fprintf(stderr, "# after %.*s\n%s\n", static_cast<int>(r.pass.size()), r.pass.data(),
                   text.c_str());
    };
  if (options.interpret) {
    interpreted_ = timings.time(
        "autodiff", [&] { return derive_program(program, pipeline_.derivative, pipeline_.wrt); });
    // --fail-on-copy refuses the program whichever engine runs it.
    if (pipeline_.buffers.fail_on_copy) {
      PipelineOptions check = pipeline_;
      check.derivative = Derivative::none;
      check.after_pass = nullptr;
      (void)emit_after(*interpreted_, "buffers", check);
    }
    return;
  }
  // The passes up to the buffer plan, without the constants' values, so the program's errors
  // come before those of the values (the real run, with them, starts again).
  // The derivative is taken first, on its own: what autodiff refuses (a grad of a function
  // without one scalar output, ...) is the program's error on either engine.
  if (pipeline_.derivative != Derivative::none)
    (void)timings.time(
        "autodiff", [&] { return derive_program(program, pipeline_.derivative, pipeline_.wrt); });
  PipelineOptions check = pipeline_;
  check.after_pass = nullptr;
  native([&] { return emit_after(program, "buffers", check); });
}

BoundProgram Executable::bind(const std::vector<RtValue>& consts, StageTimings& timings) const {
  PipelineOptions options = pipeline_;
  options.after_pass = [&](const PassReport& r) {
    if (pipeline_.after_pass) pipeline_.after_pass(r);
    timings.record(std::string(r.pass), r.ms);
  };
  return native([&] { return BoundProgram(program_, consts, std::move(options)); });
}

Executable::Call Executable::prepare(const std::vector<RtValue>& args, StageTimings& timings) {
  const size_t n_consts = program_.constvars.size();
  const std::vector<RtValue> consts(args.begin(), args.begin() + static_cast<long>(n_consts));
  if (interpreted_) {
    // The program the native path derives for these constvars' values (their integer
    // ranges may prove gathers to be windows), so that the interpreter checks the same
    // derivation. Without a known range it is the one derived before the values were read.
    const KnownConsts known = KnownConsts::of(consts);
    const bool any_range = std::any_of(known.int_range.begin(), known.int_range.end(),
                                       [](const auto& r) { return r.has_value(); });
    if (pipeline_.derivative != Derivative::none && any_range)
      interpreted_ = timings.time("autodiff", [&] {
        return derive_program(program_, pipeline_.derivative, pipeline_.wrt, known);
      });
    return [program = &*interpreted_](const std::vector<RtValue>& all) {
      return interpret(*program, all);
    };
  }
  auto bound = std::make_shared<const BoundProgram>(bind(consts, timings));
  auto compiled = std::make_shared<CompiledFunction>(native([&] { return bound->compile(); }));
  return [compiled, bound](const std::vector<RtValue>& all) {
    return (*compiled)(bound->inputs(all));
  };
}

std::vector<RtValue> Executable::operator()(const std::vector<RtValue>& args,
                                            StageTimings& timings) {
  Call call = prepare(args, timings);
  return timings.time(interpreted_ ? "interpret" : "run", [&] { return call(args); });
}

}  // namespace refjit::cli
