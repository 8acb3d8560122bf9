// `refjit dump [--emit=STAGE] FILE`: parse, verify and print a program or one of its stages.
#include <fmt/format.h>

#include <cstdio>

#include "compiler/backend/native.h"
#include "passes/buffer_assignment.h"
#include "refjit/ir/text.h"
#include "tools/autodiff.h"
#include "tools/commands.h"
#include "tools/program.h"

namespace refjit::cli {

int dump_command(const Options& o, StageTimings& timings) {
  Source source = read_source(o.file);
  Jaxpr program = load_program(source, timings);

  if (o.grad) {
    std::vector<int> wrt = gradient_positions(program, o.wrt);
    program = timings.time("grad", [&] { return gradient_program(program, wrt); });
  }
  // --fail-on-copy: the buffer plan must have no whole-buffer copy inside a loop.
  BufferOptions buffer_options{.fail_on_copy = o.fail_on_copy};
  if (o.fail_on_copy && o.emit != EmitStage::buffers)
    timings.time("buffers", [&] { return assign_buffers(program, buffer_options); });

  std::string out;
  switch (o.emit) {
    case EmitStage::jaxpr: out = timings.time("print", [&] { return print_jaxpr(program); }); break;
    case EmitStage::jvp:
    case EmitStage::linearize:
    case EmitStage::vjp:
      out = timings.time(std::string(emit_stage_name(o.emit)),
                         [&] { return autodiff_dump(o.emit, program); });
      break;
    case EmitStage::buffers:
      out = timings.time("buffers", [&] {
        return print_buffer_plan(program, assign_buffers(program, buffer_options));
      });
      break;
    case EmitStage::mlir: out = timings.time("lowering", [&] { return emit_mlir(program); }); break;
    case EmitStage::llvm: out = timings.time("llvm", [&] { return emit_llvm_ir(program); }); break;
    case EmitStage::asm_: out = timings.time("codegen", [&] { return emit_asm(program); }); break;
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace refjit::cli
