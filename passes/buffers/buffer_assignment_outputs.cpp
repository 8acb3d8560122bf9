// Buffer assignment (buffer_assigner.h): where a jaxpr's outputs, a scan body's carries and
// ys end up, and the copies that puts them there.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "passes/buffers/buffer_assigner.h"
#include "passes/buffers/buffer_rules.h"
#include "refjit/ir/error.h"

namespace refjit::buffers {

int JaxprAssigner::result_buffer(BufferOrigin origin, int k, const ArrayType& t, int outer) {
  for (size_t b = 0; b < p_.buffers.size(); ++b)
    if (p_.buffers[b].origin == origin && p_.buffers[b].index == k) return static_cast<int>(b);
  int d = fresh(t, origin, k);
  p_.buffers[d].writable = false;
  p_.buffers[d].outer = outer;
  return d;
}

void JaxprAssigner::finish_outputs() {
  switch (entry_.kind) {
    case JaxprKind::scan_body: return finish_scan_body();
    case JaxprKind::call_body: return finish_homes(false, false);
    case JaxprKind::cond_branch: return finish_homes(true, false);
    case JaxprKind::top: return finish_homes(true, true);
  }
}

void JaxprAssigner::finish_homes(bool copy_others, bool donated_alias) {
  for (size_t k = 0; k < j_.outvars.size(); ++k) {
    const Atom& a = j_.outvars[k];
    ArrayType t = j_.type_of(a).array;
    int b = buf(a);
    if (b >= 0) {
      Buffer& B = p_.buffers[b];
      bool own = B.origin == BufferOrigin::internal || B.origin == BufferOrigin::ref;
      // Only a donated input may become an output (a ref is writable but the caller's).
      bool alias = donated_alias && B.origin == BufferOrigin::input && B.writable &&
                   static_cast<size_t>(B.index) < a_.options.donated.size() &&
                   a_.options.donated[B.index];
      if (B.home < 0 && (own || alias)) {
        B.home = static_cast<int>(k);
        if (!entry_.out_outer.empty()) B.outer = entry_.out_outer.at(k);
        continue;
      }
    }
    if (!copy_others) continue;  // call bodies: the caller maps the result
    int outer = entry_.out_outer.empty() ? -1 : entry_.out_outer.at(k);
    int d = result_buffer(BufferOrigin::result, static_cast<int>(k), t, outer);
    if (b < 0) {
      p_.end_copies.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), -1, std::nullopt,
                                        fmt::format("output {} is a literal", k)));
      continue;
    }
    Var v = as_var(a);
    const Buffer& B = p_.buffers[b];
    std::string why =
        B.home >= 0
            ? fmt::format("its buffer already holds output {}", B.home)
            : fmt::format("`{}` lives in {} buffer {} {}, which cannot be the output", name(v),
                          origin_name(B.origin), B.index, B.writable ? "" : "(not writable)");
    p_.end_copies.push_back(make_copy(CopyKind::whole, b, d, t.byte_size(), -1, v,
                                      fmt::format("output {}: {}", k, why)));
  }
}

void JaxprAssigner::finish_scan_body() {
  int nc = entry_.num_consts, nk = entry_.num_carry;
  int end = static_cast<int>(n_);
  std::vector<int> carry_buf(nk);
  std::vector<Var> binders = body_binders(j_);
  for (int k = 0; k < nk; ++k) carry_buf[k] = p_.buffer_of_var[binders.at(nc + k).id];
  std::vector<Copy> ys, stage, carries;
  for (size_t k = nk; k < j_.outvars.size(); ++k) {
    const Atom& a = j_.outvars[k];
    ArrayType t = j_.type_of(a).array;
    int y = static_cast<int>(k) - nk;
    int outer = y < static_cast<int>(entry_.out_outer.size()) ? entry_.out_outer[y] : -1;
    int d = result_buffer(BufferOrigin::y_row, y, t, outer);
    int b = buf(a);
    if (b < 0)
      ys.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), -1, std::nullopt,
                             fmt::format("y {} is a literal", y)));
    else
      ys.push_back(make_copy(CopyKind::read, b, d, t.byte_size(), -1, as_var(a),
                             fmt::format("y {} into row t of the stacked output", y)));
  }
  for (int k = 0; k < nk; ++k) {
    const Atom& a = j_.outvars.at(k);
    ArrayType t = j_.type_of(a).array;
    int C = carry_buf[k];
    int b = buf(a);
    if (b == C) continue;
    if (b < 0) {
      carries.push_back(make_copy(CopyKind::fill, -1, C, t.byte_size(), -1, std::nullopt,
                                  fmt::format("carry-out {} is a literal", k)));
      continue;
    }
    if (try_merge(b, C, end, std::nullopt)) continue;
    Var v = as_var(a);
    const Buffer& B = p_.buffers[b];
    std::string why;
    if (B.origin == BufferOrigin::internal) {
      std::optional<Var> blocker = live_value(C, B.index - 1);
      why = fmt::format(
          "carry-out {} `{}` is a fresh value made by eqn {} (`{}`) while the carry buffer's "
          "old contents{} are still live, so it cannot be computed in the carry buffer",
          k, name(v), B.index, prim_name(j_.eqns.at(B.index).prim),
          blocker
              ? fmt::format(" (`{}`, used by {})", name(*blocker), use_text(last_use_[blocker->id]))
              : std::string());
    } else {
      why = fmt::format("carry-out {} `{}` lives in {} buffer {}, not in the carry buffer", k,
                        name(v), origin_name(B.origin), B.index);
    }
    Copy c = make_copy(CopyKind::whole, b, C, t.byte_size(), -1, v, why);
    if (B.origin == BufferOrigin::carry) {  // permuted carries: stage through a temp
      int tmp = fresh(t, BufferOrigin::temp, k);
      stage.push_back(make_copy(CopyKind::whole, b, tmp, t.byte_size(), -1, v,
                                fmt::format("staging carry-out {} (another carry's buffer)", k)));
      c.src = tmp;
    }
    carries.push_back(std::move(c));
  }
  for (auto* list : {&ys, &stage, &carries})
    p_.end_copies.insert(p_.end_copies.end(), list->begin(), list->end());
}

}  // namespace refjit::buffers
