// The text of the `lowering-plan` stage (`refjit dump --emit=lowering-plan`): the decisions of
// every jaxpr of the buffer plan, with eqns named by the values print_jaxpr gives them.
#include <fmt/format.h>

#include <map>

#include "compiler/backend/fusion.h"
#include "passes/buffers/buffer_names.h"

namespace refjit {

namespace {

// An eqn of plan `plan` as BufferNames prints it.
std::string eqn_text(const BufferNames& names, int plan, const Jaxpr& j, int32_t eqn) {
  return names.eqn(plan, j.eqns.at(static_cast<size_t>(eqn)));
}

std::string folded_list(const BufferNames& names, int plan, const Jaxpr& j,
                        const std::vector<int32_t>& eqns) {
  std::string s;
  for (int32_t k : eqns) {
    if (k < 0) continue;
    s += fmt::format("{}      eqn {}: {}", s.empty() ? "" : "\n", k, eqn_text(names, plan, j, k));
  }
  return s;
}

void print_one(std::string& out, const BufferNames& names, int plan, const JaxprBuffers& p,
               const LoweringDecisions& d) {
  const Jaxpr& j = *p.jaxpr;
  std::string body;
  for (const RowLoop& loop : d.row_loops.loops) {
    const std::string blocks =
        loop.block_rows == 1 ? ""
                             : fmt::format(" in {} blocks of {}", loop.blocks(), loop.block_rows);
    body += fmt::format("  row loop over {} rows{} at eqn {}, computing row by row\n", loop.rows,
                        blocks, loop.root_of(0));
    for (const RowItem& item : loop.items) {
      const char* how = item.kind == RowItemKind::partial   ? " (a partial per row)"
                        : item.kind == RowItemKind::columns ? " (a partial per block)"
                        : item.kind == RowItemKind::matvec  ? " (a dot product per row)"
                                                            : "";
      body += fmt::format("      eqn {}: {}{}\n", item.root(),
                          eqn_text(names, plan, j, static_cast<int32_t>(item.root())), how);
    }
    if (!loop.passengers.empty())
      body += fmt::format(
          "    after the eqns it moves before it\n{}\n",
          folded_list(names, plan, j,
                      std::vector<int32_t>(loop.passengers.begin(), loop.passengers.end())));
  }
  if (body.empty()) return;
  out += fmt::format("{}:\n{}", p.where, body);
}

}  // namespace

std::string print_lowering_decisions(const Jaxpr& top, const BufferAssignment& assignment,
                                     const std::vector<LoweringDecisions>& decisions) {
  BufferNames names(top);
  std::string out;
  for (size_t i = 0; i < assignment.jaxprs.size() && i < decisions.size(); ++i)
    print_one(out, names, static_cast<int>(i), assignment.jaxprs[i], decisions[i]);
  if (out.empty()) out = "no row loops\n";
  return out;
}

}  // namespace refjit
