// The derived programs behind --jvp, --grad and --emit=jvp|linearize|vjp, built with the
// passes in passes/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "refjit/ir/jaxpr.h"
#include "tools/cli_options.h"

namespace refjit::cli {

// Forward mode with one tangent per invar (int and bool tangents are accepted and ignored):
// constvars; primals..., tangents... -> outputs..., one tangent per output.
Jaxpr forward_mode_program(const Jaxpr& program);

// The invar positions --grad differentiates: `wrt` if given, else every float, non-ref invar.
// Throws Error when the default finds nothing to differentiate.
std::vector<int> gradient_positions(const Jaxpr& program,
                                    const std::optional<std::vector<int>>& wrt);

// Same binders as `program` (one float scalar output); returns that output, then one gradient
// per position in `wrt`, in that order. Throws Error/RefError (E2) for a bad position.
Jaxpr gradient_program(const Jaxpr& program, const std::vector<int>& wrt);

// The text of `dump --emit=jvp|linearize|vjp` (docs/cli.md describes each shape).
std::string autodiff_dump(EmitStage stage, const Jaxpr& program);

}  // namespace refjit::cli
