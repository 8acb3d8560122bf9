#include "passes/collectives/overlap_sums.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "ir/sub_jaxprs.h"
#include "passes/jaxpr_util.h"
#include "refjit/ir/primitive.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

bool is_sum(const Eqn& e) { return e.prim == Prim::psum || e.prim == Prim::psum_invariant; }

bool holds_barrier(const Jaxpr& j);

// An eqn no start or wait moves across: another collective (the collectives keep their order
// relative to each other), a host call, or an eqn whose body holds either.
bool is_barrier(const Eqn& e) {
  const PrimInfo& info = prim_info(e.prim);
  if (info.host_effect || (info.communicates && !is_sum(e))) return true;
  return info.has_subjaxprs && any_sub_jaxpr(e, holds_barrier);
}

bool holds_barrier(const Jaxpr& j) {
  return std::any_of(j.eqns.begin(), j.eqns.end(),
                     [](const Eqn& e) { return is_sum(e) || is_barrier(e); });
}

// One psum of the eqn list, with where it may move: its start after eqn `start_after` (-1: before
// every eqn), its wait before eqn `wait_before` (the list's size: after every eqn).
struct Sum {
  size_t eqn;
  int64_t start_after;
  int64_t wait_before;
  int64_t bytes;
};

// Sums started together: their operands concatenated (when more than one), one start after eqn
// `start_after`, one wait before eqn `wait_before`.
struct Bucket {
  std::vector<size_t> sums;  // eqn indices, in start order
  int64_t start_after = -1;
  int64_t wait_before = 0;
  int64_t bytes = 0;
  bool closed = false;  // holds a sum too large to share a bucket
};

class Splitter {
 public:
  Splitter(Jaxpr& j, const OverlapSumsOptions& options) : j_(j), options_(options) {}

  int run() {
    std::vector<Bucket> buckets = bucket(sums());
    if (buckets.empty()) return 0;
    // What goes after each eqn (index + 1; 0 is before the first) and before it.
    std::vector<std::vector<const Bucket*>> starts(j_.eqns.size() + 1), waits(j_.eqns.size() + 1);
    std::vector<bool> split(j_.eqns.size(), false);
    for (const Bucket& b : buckets) {
      starts[static_cast<size_t>(b.start_after + 1)].push_back(&b);
      waits[static_cast<size_t>(b.wait_before)].push_back(&b);
      for (size_t s : b.sums) split[s] = true;
    }
    std::vector<Eqn> old = std::move(j_.eqns);
    j_.eqns.clear();
    std::vector<Var> started(buckets.size());
    auto index_of = [&](const Bucket* b) { return static_cast<size_t>(b - buckets.data()); };
    for (size_t i = 0; i <= old.size(); ++i) {
      // Starts first: a bucket may start and be waited for at the same point (nothing to
      // overlap with), and another's wait then overlaps with this one's sum.
      for (const Bucket* b : starts[i]) started[index_of(b)] = emit_start(*b, old);
      for (const Bucket* b : waits[i]) emit_wait(*b, old, started[index_of(b)]);
      if (i < old.size() && !split[i]) j_.eqns.push_back(std::move(old[i]));
    }
    int n = 0;
    for (const Bucket& b : buckets) n += static_cast<int>(b.sums.size());
    return n;
  }

 private:
  std::vector<Sum> sums() const {
    const UseDef ud(j_);
    const int64_t n = static_cast<int64_t>(j_.eqns.size());
    std::vector<bool> barrier(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) barrier[static_cast<size_t>(i)] = is_barrier(j_.eqns[i]);
    std::vector<Sum> out;
    int64_t last_barrier = -1;
    for (int64_t i = 0; i < n; ++i) {
      const Eqn& e = j_.eqns[static_cast<size_t>(i)];
      if (barrier[static_cast<size_t>(i)]) last_barrier = i;
      if (!is_sum(e)) continue;
      int64_t ready = is_var(e.ins[0]) ? ud.def_index(as_var(e.ins[0])) : -1;
      int64_t first_read = n;
      for (const UseDef::Use& u : ud.uses(e.outs[0]))
        if (!u.is_output()) first_read = std::min(first_read, static_cast<int64_t>(u.eqn));
      int64_t next_barrier = i + 1;
      while (next_barrier < n && !barrier[static_cast<size_t>(next_barrier)]) ++next_barrier;
      const ArrayType& t = j_.type_of(e.outs[0]).array;
      out.push_back(Sum{static_cast<size_t>(i), std::max(ready, last_barrier),
                        std::min(first_read, next_barrier), t.num_elements() * byte_size(t.dtype)});
    }
    return out;
  }

  // Greedy in the order the operands become ready: a sum joins the latest bucket of its axis
  // and dtype when it fits the bucket's size and the bucket can still start before any of its
  // results is read; otherwise it opens a bucket.
  std::vector<Bucket> bucket(std::vector<Sum> sums) const {
    std::sort(sums.begin(), sums.end(), [](const Sum& a, const Sum& b) {
      return a.start_after != b.start_after ? a.start_after < b.start_after : a.eqn < b.eqn;
    });
    std::vector<Bucket> buckets;
    for (const Sum& s : sums) {
      Bucket* open = nullptr;
      for (auto b = buckets.rbegin(); b != buckets.rend() && !open; ++b)
        if (same_kind(*b, s)) open = &*b;
      if (open && joins(*open, s)) {
        open->sums.push_back(s.eqn);
        open->start_after = std::max(open->start_after, s.start_after);
        open->wait_before = std::min(open->wait_before, s.wait_before);
        open->bytes += s.bytes;
        continue;
      }
      buckets.push_back(
          Bucket{{s.eqn}, s.start_after, s.wait_before, s.bytes, s.bytes > options_.shared_bytes});
    }
    return buckets;
  }

  // Whether `s` sums over `b`'s axis, in its dtype.
  bool same_kind(const Bucket& b, const Sum& s) const {
    const Eqn& first = j_.eqns[b.sums.front()];
    const Eqn& e = j_.eqns[s.eqn];
    return first.params.get<std::string>("axis_name") == e.params.get<std::string>("axis_name") &&
           j_.type_of(first.outs[0]).array.dtype == j_.type_of(e.outs[0]).array.dtype;
  }

  bool joins(const Bucket& b, const Sum& s) const {
    return !b.closed && s.bytes <= options_.shared_bytes &&
           b.bytes + s.bytes <= options_.bucket_bytes &&
           std::max(b.start_after, s.start_after) < std::min(b.wait_before, s.wait_before);
  }

  Var add(Prim p, std::vector<Atom> ins, Params params) {
    std::vector<Type> in_types;
    for (const Atom& a : ins) in_types.push_back(j_.type_of(a));
    const std::vector<Type> out_types = infer_types(p, in_types, params);
    Var out = j_.new_var(out_types.at(0));
    j_.eqns.push_back(Eqn{p, std::move(params), std::move(ins), {out}});
    return out;
  }

  // Defines `out` as `p(ins)`.
  void add_into(Var out, Prim p, std::vector<Atom> ins, Params params) {
    j_.eqns.push_back(Eqn{p, std::move(params), std::move(ins), {out}});
  }

  Params axis(const Bucket& b, const std::vector<Eqn>& old) const {
    return Params{{"axis_name", old[b.sums.front()].params.get<std::string>("axis_name")}};
  }

  Var emit_start(const Bucket& b, const std::vector<Eqn>& old) {
    if (b.sums.size() == 1) return add(Prim::psum_start, {old[b.sums[0]].ins[0]}, axis(b, old));
    std::vector<Atom> flat;
    for (size_t s : b.sums) {
      const Atom& x = old[s].ins[0];
      const ArrayType t = j_.type_of(x).array;
      if (t.shape.size() == 1) {
        flat.push_back(x);
        continue;
      }
      flat.push_back(
          add(Prim::reshape, {x},
              Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList{t.num_elements()}}}));
    }
    const Var joined = add(Prim::concatenate, std::move(flat), Params{{"dimension", int64_t{0}}});
    return add(Prim::psum_start, {joined}, axis(b, old));
  }

  void emit_wait(const Bucket& b, const std::vector<Eqn>& old, Var started) {
    if (b.sums.size() == 1) {
      add_into(old[b.sums[0]].outs[0], Prim::psum_wait, {started}, axis(b, old));
      return;
    }
    const Var sum = add(Prim::psum_wait, {started}, axis(b, old));
    int64_t offset = 0;
    for (size_t s : b.sums) {
      const Var out = old[s].outs[0];
      const ArrayType t = j_.type_of(out).array;
      const int64_t size = t.num_elements();
      Params window{{"start_indices", IntList{offset}},
                    {"limit_indices", IntList{offset + size}},
                    {"strides", NoneParam{}}};
      offset += size;
      if (t.shape.size() == 1) {
        add_into(out, Prim::slice, {sum}, std::move(window));
        continue;
      }
      const Var piece = add(Prim::slice, {sum}, std::move(window));
      add_into(out, Prim::reshape, {piece},
               Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(t.shape)}});
    }
  }

  Jaxpr& j_;
  const OverlapSumsOptions& options_;
};

int overlap_sums_in(Jaxpr& j, const OverlapSumsOptions& options) {
  int changes = 0;
  const std::function<int(Jaxpr&)> inner = [&](Jaxpr& body) {
    return overlap_sums_in(body, options);
  };
  for (Eqn& e : j.eqns) changes += rewrite_body(e, inner);
  return changes + Splitter(j, options).run();
}

}  // namespace

OverlapSumsOptions OverlapSumsOptions::from_environment() {
  OverlapSumsOptions o;
  if (const char* v = std::getenv("REFJIT_OVERLAP_SUMS"); v && std::string(v) == "0")
    o.enabled = false;
  if (const char* v = std::getenv("REFJIT_SUM_BUCKET_BYTES"); v && *v) {
    char* end = nullptr;
    const long long bytes = std::strtoll(v, &end, 10);
    if (end && *end == '\0' && bytes >= 0) o.bucket_bytes = bytes;
  }
  return o;
}

Jaxpr overlap_sums(const Jaxpr& jaxpr, const OverlapSumsOptions& options) {
  if (!options.enabled) return jaxpr;
  return rewritten_copy(
      jaxpr, [&](Jaxpr& j) { return overlap_sums_in(j, options); }, nullptr);
}

}  // namespace refjit
