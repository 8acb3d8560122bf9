// Internal to buffer assignment (passes/buffer_assignment*.cpp): the assigner of one jaxpr
// and the state shared across a program's jaxprs. JaxprAssigner's members live in four files:
//   buffer_assignment.cpp             setup, liveness, the walk, the simple eqns, the driver;
//   buffer_assignment_refs.cpp        ref eqns (get, swap, addupdate) and buffer merging;
//   buffer_assignment_structured.cpp  scan, cond and call bodies;
//   buffer_assignment_outputs.cpp     where outputs, carries and ys end up.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "passes/buffers/buffer_assignment.h"
#include "passes/buffers/buffer_names.h"

namespace refjit::buffers {

enum class JaxprKind { top, scan_body, cond_branch, call_body };

// How a jaxpr is entered: its binder buffers and where its outputs go.
struct Entry {
  JaxprKind kind = JaxprKind::top;
  int parent = -1, parent_eqn = -1;
  std::string where = "top level";
  bool in_loop = false;
  std::vector<Buffer> binders;        // one per constvar, then per invar
  int num_consts = 0, num_carry = 0;  // scan body
  std::vector<int> out_outer;         // scan: stacked ys buffers; cond: result buffers
};

class JaxprAssigner;

class Assigner {
 public:
  Assigner(const BufferOptions& o, const Jaxpr& top) : options(o), names(top) {}
  const BufferOptions& options;
  BufferNames names;  // the names print_jaxpr gives, for messages
  BufferAssignment out;
  std::vector<std::vector<int>> merged;  // by plan: merged_into per buffer
  int assign(const Jaxpr& j, Entry entry);
};

inline bool is_dropped(const Jaxpr& j, Var v) { return j.info(v).dropped; }

// A sub-jaxpr's binders in the order the eqn's operands bind them: constvars, then invars.
inline std::vector<Var> body_binders(const Jaxpr& j) {
  std::vector<Var> v = j.constvars;
  v.insert(v.end(), j.invars.begin(), j.invars.end());
  return v;
}

class JaxprAssigner {
 public:
  JaxprAssigner(Assigner& a, const Jaxpr& j, Entry entry, int self)
      : a_(a), j_(j), entry_(std::move(entry)), self_(self) {}

  // Walks the eqns until an attempt goes through. An attempt stops early when a whole get
  // that lent its value the ref's buffer turns out to need a copy after all (a later write
  // would clobber the value): that get is marked, and the walk starts again. Each restart
  // marks one more get, so there are at most as many attempts as whole gets.
  JaxprBuffers run();

 private:
  Assigner& a_;
  const Jaxpr& j_;
  Entry entry_;
  int self_;
  JaxprBuffers p_;
  size_t n_ = 0;
  std::vector<int> last_use_;  // by var: last eqn reading it; n_ for outvars; -1 never
  std::vector<std::vector<uint32_t>> members_;  // by buffer: the vars in it, in id order
  bool restart_ = false;                        // the attempt is abandoned (run())
  std::vector<int> def_;                        // by var: defining eqn; -1 for binders
  std::vector<std::vector<std::pair<int, bool>>> ref_access_;  // by ref var: (eqn, overwrite)
  std::vector<int> origin_get_;   // by var: the whole get whose buffer it shares, or -1
  std::set<int> copy_gets_;       // whole gets that copy (survives restarts)
  std::vector<int> merged_into_;  // by buffer

  // ------------------------------------------------------------ setup

  void reset();

  // `r[...] <- y` with the old value unused: the ref's contents are not read.
  bool is_whole_overwrite(const Eqn& e, size_t operand) const;
  int last_use_of(Var v) const;
  static const Indexer* indexer(const Eqn& e);
  static bool whole_indexer(const Eqn& e);

  int add_buffer(Buffer b);
  int fresh(const ArrayType& t, BufferOrigin origin, int index);

  // ------------------------------------------------------------ liveness

  int buf(const Atom& a) const { return is_var(a) ? p_.buffer_of_var[as_var(a).id] : -1; }

  bool ref_content_live_after(Var r, int i) const;

  // Whether some value (or ref) in buffer `b` still needs the contents it has after eqn i.
  bool live_after(int b, int i) const;

  // The first value in `b` live after eqn i, for messages.
  std::optional<Var> live_value(int b, int i) const;

  std::string name(Var v) const { return a_.names.use(self_, v); }
  std::string use_text(int last) const;

  // Why buffer `b` cannot be overwritten at eqn i.
  std::string why_not_writable(int b, int i) const;

  Copy make_copy(CopyKind kind, int src, int dst, int64_t bytes, int eqn, std::optional<Var> v,
                 std::string why) const;

  // ------------------------------------------------------------ refs

  // Eqn i writes ref `r`: every value sharing r's buffer must be dead by then (or be the value
  // written, `keep`); otherwise the whole get that lent it the buffer copies instead. A
  // structured eqn (scan, cond, jit) reads its operands while its body writes the ref, so
  // there an operand last used by eqn i itself still counts as live (`operands_live`).
  // Returns false when the attempt is abandoned (restart_): the caller returns at once.
  [[nodiscard]] bool before_ref_write(Var r, int i, std::optional<Var> keep = std::nullopt,
                                      bool operands_live = false);

  // Merges fresh buffer `y` into `d` (destination passing) when d's contents are dead from
  // y's creation on and nobody else needs y after eqn `until`.
  bool try_merge(int y, int d, int until, std::optional<Var> ref);

  // ------------------------------------------------------------ the walk

  void walk();

  // Puts `v` in buffer `b` (out of the one it was in), keeping each buffer's members in var
  // order, so liveness questions about a buffer look at its own values only.
  void set(Var v, int b);

  void all_fresh(const Eqn& e, size_t i);

  void elementwise(const Eqn& e, size_t i);

  void view(const Eqn& e, size_t i);

  void read(const Eqn& e, size_t i);

  void update(const Eqn& e, size_t i);

  // Whether update eqn `e` reads operand 0's buffer `b` through another operand in a way that
  // writing b in place would spoil (then operand 0 is copied first).
  bool reads_updated_buffer(const Eqn& e, int b) const;

  // ------------------------------------------------------------ refs

  void ref_op(const Eqn& e, size_t i);

  void swap(const Eqn& e, size_t i);

  // ------------------------------------------------------------ structured eqns

  Buffer binder(BufferOrigin origin, int index, const Atom& operand, bool writable) const;

  // Whether operand k of eqn i may be handed over for overwriting: its buffer is writable, dead
  // after eqn i, and no other operand of the eqn is in it.
  bool can_hand_over(const Eqn& e, size_t k, int i) const;

  // Refs the sub-jaxpr writes or accumulates into count as writes at eqn i. False when the
  // attempt is abandoned (before_ref_write).
  [[nodiscard]] bool sub_ref_writes(const Eqn& e, int i, const Jaxpr& body, size_t first_operand);

  std::string sub_where(const Eqn& e, size_t i, const std::string& what) const;

  void structured(const Eqn& e, size_t i);

  void scan(const Eqn& e, size_t i);

  void cond(const Eqn& e, size_t i);

  void call(const Eqn& e, size_t i, const char* param);

  void while_loop(const Eqn& e, size_t i);
  // A loop's carries: operands first..first+nk-1 become result buffers 0..nk-1.
  void loop_carries(const Eqn& e, int ii, size_t first, size_t nk);
  // The entry of a loop's body: nc consts from operand `first` on, then nk carries living in
  // the eqn's result buffers (a scan adds its rows).
  Entry loop_body_entry(const Eqn& e, size_t i, size_t first, size_t nc, size_t nk) const;

  // ------------------------------------------------------------ outputs

  int result_buffer(BufferOrigin origin, int k, const ArrayType& t, int outer);

  void finish_outputs();

  // Top level / cond branch / call body: an internal buffer becomes the home of the output
  // it holds; anything else is copied into the home (top level: a donated input is returned
  // in place).
  void finish_homes(bool copy_others, bool donated_alias);

  void finish_scan_body();

  friend class Assigner;
};

}  // namespace refjit::buffers
