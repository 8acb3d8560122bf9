// The CLI's side of --grad, --jvp and --emit=jvp|linearize|vjp: which inputs are
// differentiated, how the pipeline is told, and the autodiff views' text. The derived
// programs themselves are the pipeline's `autodiff` pass (driver/pipeline.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driver/pipeline.h"
#include "refjit/ir/jaxpr.h"
#include "tools/cli_options.h"

namespace refjit::cli {

// The invar positions --grad differentiates: `wrt` if given, else every float, non-ref invar.
// Throws Error when the default finds nothing to differentiate.
std::vector<int> gradient_positions(const Jaxpr& program,
                                    const std::optional<std::vector<int>>& wrt);

// The pipeline options the command line asks for (--grad/--wrt, --jvp, --fail-on-copy,
// --verify-each).
PipelineOptions pipeline_options(const Options& o, const Jaxpr& program);

// The text of `dump --emit=jvp|linearize|vjp|discharged` (docs/cli.md describes each shape).
std::string program_view(std::string_view view, const Jaxpr& program);

}  // namespace refjit::cli
