// print_jaxpr: the jaxpr text format as jax.make_jaxpr prints it (docs/ir.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/text_params.h"
#include "refjit/ir/text.h"

namespace refjit {

namespace {

// JAX's variable names: a..z, ba..bz, ..., zz, baa, ... (base 26, no leading 'a').
std::string alphabetic_name(uint64_t n) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n != 0);
  return s;
}

std::string int_tuple(const std::vector<int64_t>& xs) {
  if (xs.size() == 1) return fmt::format("({},)", xs[0]);
  return fmt::format("({})", fmt::join(xs, ", "));
}

std::string bool_tuple(const std::vector<int64_t>& xs) {
  std::vector<std::string_view> words;
  for (int64_t x : xs) words.push_back(x ? "True" : "False");
  if (words.size() == 1) return fmt::format("({},)", words[0]);
  return fmt::format("({})", fmt::join(words, ", "));
}

std::string double_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// A jit's name as a `let` name that reads back as one identifier: characters other than
// letters, digits and '_' become '_' ("jaxpr" when nothing usable is left).
std::string identifier(std::string name) {
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || name == "_")
    return "jaxpr";
  // Words the grammar reads otherwise where a name would stand.
  for (const char* word : {"None", "True", "False", "let", "in", "lambda", "inf", "nan"})
    if (name == word) return name + "_";
  return name;
}

class Printer {
 public:
  std::string run(const Jaxpr& top) {
    find_shared(top);
    for (const auto& [j, name] : shared_order_) {
      out_ += "let " + name + " = ";
      print_jaxpr(*j, 0);
      out_ += " in\n";
    }
    print_jaxpr(top, 0);
    return std::move(out_);
  }

 private:
  // Names of one jaxpr's variables; sub-jaxprs get their own table but share the counter.
  struct Names {
    const Jaxpr& jaxpr;
    std::vector<std::string> name;
  };

  std::string bind(Names& n, Var v) {
    if (v.id >= n.name.size()) return "<bad var>";
    if (n.jaxpr.vars[v.id].dropped) return "_";
    if (n.name[v.id].empty()) n.name[v.id] = alphabetic_name(counter_++);
    return n.name[v.id];
  }
  // A use; a var used before it is bound (malformed) gets a name anyway.
  std::string use(Names& n, Var v) { return bind(n, v); }

  std::string atom(Names& n, const Atom& a) {
    if (const Var* v = std::get_if<Var>(&a)) return use(n, *v);
    return std::get<Literal>(a).str();
  }
  // Dynamic indexer parts print without dtype in JAX; literals keep theirs here so the text
  // reads back to the same (dynamic) indexer.
  std::string index_atom(Names& n, const Atom& a) { return atom(n, a); }

  std::string binder(Names& n, Var v) {
    std::string name = bind(n, v);
    const Type& t = v.id < n.jaxpr.vars.size() ? n.jaxpr.vars[v.id].type : Type{};
    return name + ":" + t.str();
  }

  // JAX's rule: a sub-jaxpr used more than once, or longer than ten equations, is printed
  // once before the program as `let NAME = { ... } in` and referred to by NAME. NAME is the
  // `name` of the first jit calling it (without <>), else "jaxpr", numbered when repeated.
  void find_shared(const Jaxpr& top) {
    std::unordered_map<const Jaxpr*, int> uses;
    std::unordered_map<const Jaxpr*, std::string> names;
    std::vector<const Jaxpr*> order;
    std::deque<const Jaxpr*> todo{&top};
    while (!todo.empty()) {
      const Jaxpr* j = todo.front();
      todo.pop_front();
      if (uses[j]++ == 0) order.push_back(j);
      if (j != &top && j->eqns.size() > 10) ++uses[j];
      for (const Eqn& e : j->eqns) {
        std::string name = e.params.get_or<std::string>("name", "");
        std::erase(name, '<');
        std::erase(name, '>');
        for (const auto& [_, v] : e.params.entries()) {
          auto visit = [&](const JaxprPtr& sub) {
            if (!sub) return;
            todo.push_back(sub.get());
            if (!name.empty()) names.emplace(sub.get(), name);
          };
          if (const auto* sub = std::get_if<JaxprPtr>(&v)) visit(*sub);
          if (const auto* subs = std::get_if<JaxprList>(&v))
            for (const JaxprPtr& sub : *subs) visit(sub);
        }
      }
    }
    std::unordered_map<std::string, int> taken;
    for (const Jaxpr* j : order) {
      if (uses[j] < 2) continue;
      auto it = names.find(j);
      std::string name = it == names.end() ? "jaxpr" : identifier(it->second);
      if (int count = taken[name]; count > 0) {
        ++taken[name];
        name += std::to_string(count);
      }
      ++taken[name];
      shared_name_[j] = name;
      shared_order_.emplace_back(j, name);
    }
  }

  void print_jaxpr_or_name(const Jaxpr& j, int indent) {
    if (auto it = shared_name_.find(&j); it != shared_name_.end()) {
      out_ += it->second;
    } else {
      print_jaxpr(j, indent);
    }
  }

  void print_jaxpr(const Jaxpr& j, int indent) {
    Names n{j, std::vector<std::string>(j.vars.size())};
    out_ += "{ lambda ";
    print_binders(n, j.constvars);
    out_ += "; ";
    print_binders(n, j.invars);
    out_ += ". let";
    if (j.eqns.empty()) {
      out_ += "  in ";
    } else {
      for (const Eqn& e : j.eqns) {
        out_ += '\n';
        out_.append(indent + 4, ' ');
        print_eqn(n, e, indent + 4);
      }
      out_ += '\n';
      out_.append(indent + 2, ' ');
      out_ += "in ";
    }
    out_ += '(';
    for (size_t k = 0; k < j.outvars.size(); ++k) {
      if (k) out_ += ", ";
      out_ += atom(n, j.outvars[k]);
    }
    out_ += j.outvars.size() == 1 ? ",) }" : ") }";
  }

  void print_binders(Names& n, const std::vector<Var>& vs) {
    for (size_t k = 0; k < vs.size(); ++k) {
      if (k) out_ += ' ';
      out_ += binder(n, vs[k]);
    }
  }

  void print_eqn(Names& n, const Eqn& e, int indent) {
    if (print_ref_eqn(n, e)) return;
    if (!e.outs.empty()) {
      for (size_t k = 0; k < e.outs.size(); ++k) {
        if (k) out_ += ' ';
        out_ += binder(n, e.outs[k]);
      }
      out_ += " = ";
    }
    out_ += prim_name(e.prim);
    print_params(n, e, indent);
    for (const Atom& a : e.ins) {
      out_ += ' ';
      out_ += atom(n, a);
    }
  }

  // The params printed for `e`, in print order: sorted by name (Params keeps them sorted),
  // jit's name first, without the ones JAX hides or refjit ignores.
  std::vector<const std::pair<std::string, ParamValue>*> printed_params(const Eqn& e) {
    std::vector<const std::pair<std::string, ParamValue>*> out;
    for (const auto& entry : e.params.entries()) {
      const auto& [name, value] = entry;
      if (text::is_ignored_param(e.prim, name)) continue;
      if (e.prim == Prim::broadcast_in_dim) {
        // JAX leaves out what the binder's type implies: the shape, and an empty
        // broadcast_dimensions (a scalar operand).
        if (name == "shape") continue;
        if (name == "broadcast_dimensions") {
          const IntList* bd = std::get_if<IntList>(&value);
          if (bd && bd->empty()) continue;
        }
      }
      if (e.prim == Prim::jit && name == "name") {
        out.insert(out.begin(), &entry);
      } else {
        out.push_back(&entry);
      }
    }
    return out;
  }

  void print_params(Names& n, const Eqn& e, int indent) {
    auto params = printed_params(e);
    if (params.empty()) return;
    bool nested = false;
    // Shared jaxprs print as their name and do not count.
    auto inline_jaxpr = [&](const JaxprPtr& j) { return j && !shared_name_.count(j.get()); };
    for (const auto* p : params) {
      if (const auto* j = std::get_if<JaxprPtr>(&p->second)) nested |= inline_jaxpr(*j);
      if (const auto* js = std::get_if<JaxprList>(&p->second))
        nested |= std::any_of(js->begin(), js->end(), inline_jaxpr);
    }
    out_ += '[';
    for (size_t k = 0; k < params.size(); ++k) {
      // With a sub-jaxpr every param gets its own line, as JAX's pretty printer breaks them.
      if (nested) {
        out_ += '\n';
        out_.append(indent + 2, ' ');
      } else if (k) {
        out_ += ' ';
      }
      out_ += params[k]->first;
      out_ += '=';
      print_value(n, e.prim, params[k]->first, params[k]->second, indent + 2);
    }
    if (nested) {
      out_ += '\n';
      out_.append(indent, ' ');
    }
    out_ += ']';
  }

  void print_value(Names& n, Prim prim, const std::string& name, const ParamValue& v, int indent) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, NoneParam>) {
            out_ += "None";
          } else if constexpr (std::is_same_v<T, bool>) {
            out_ += x ? "True" : "False";
          } else if constexpr (std::is_same_v<T, int64_t>) {
            out_ += fmt::format("{}", x);
          } else if constexpr (std::is_same_v<T, double>) {
            out_ += double_text(x);
          } else if constexpr (std::is_same_v<T, std::string>) {
            out_ += x;
          } else if constexpr (std::is_same_v<T, DType>) {
            out_ += long_name(x);
          } else if constexpr (std::is_same_v<T, IntList>) {
            const text::ParamSpec* spec = text::find_param_spec(prim, name);
            bool bools = spec && spec->kind == text::ParamKind::bools_or_none;
            out_ += bools ? bool_tuple(x) : int_tuple(x);
          } else if constexpr (std::is_same_v<T, IntListList>) {
            std::vector<std::string> parts;
            for (const auto& row : x) parts.push_back(int_tuple(row));
            if (parts.size() == 1) {
              out_ += "(" + parts[0] + ",)";
            } else {
              out_ += fmt::format("({})", fmt::join(parts, ", "));
            }
          } else if constexpr (std::is_same_v<T, DotDims>) {
            out_ += fmt::format("(([{}], [{}]), ([{}], [{}]))", fmt::join(x.lhs_contract, ", "),
                                fmt::join(x.rhs_contract, ", "), fmt::join(x.lhs_batch, ", "),
                                fmt::join(x.rhs_batch, ", "));
          } else if constexpr (std::is_same_v<T, Indexer>) {
            out_ += indexer_text(n, x, {}, {});
          } else if constexpr (std::is_same_v<T, JaxprPtr>) {
            if (x) {
              print_jaxpr_or_name(*x, indent);
            } else {
              out_ += "None";
            }
          } else if constexpr (std::is_same_v<T, JaxprList>) {
            out_ += '(';
            for (const JaxprPtr& j : x) {
              out_ += '\n';
              out_.append(indent + 2, ' ');
              if (j) {
                print_jaxpr_or_name(*j, indent + 2);
              } else {
                out_ += "None";
              }
            }
            out_ += '\n';
            out_.append(indent, ' ');
            out_ += ')';
          }
        },
        v);
  }

  // `[c:c+1,:,3]` for an indexer of a ref of shape `dims`; `dyn` are the dynamic operands.
  std::string indexer_text(Names& n, const Indexer& idx, const Shape& dims,
                           std::span<const Atom> dyn) {
    if (idx.is_whole()) return "[...]";
    std::vector<std::string> parts;
    size_t next_dyn = 0;
    auto dyn_text = [&]() -> std::string {
      if (next_dyn >= dyn.size()) return "<missing>";
      return index_atom(n, dyn[next_dyn++]);
    };
    for (size_t k = 0; k < idx.dims.size(); ++k) {
      const IndexerDim& d = idx.dims[k];
      int64_t dim = k < dims.size() ? dims[k] : -1;
      switch (d.kind) {
        case IndexerDim::Kind::slice:
          if (d.dynamic) {
            std::string s = dyn_text();
            std::string t = fmt::format("{}:{}+{}", s, s, d.size);
            if (d.stride != 1) t += fmt::format(":{}", d.stride);
            parts.push_back(t);
          } else {
            std::string start = d.start == 0 ? "" : fmt::format("{}", d.start);
            int64_t end = d.start + d.size * d.stride;
            if (d.stride != 1 && dim >= 0 && end > dim) end = dim;
            std::string end_text = end == dim ? "" : fmt::format("{}", end);
            std::string t = start + ":" + end_text;
            if (d.stride != 1) t += fmt::format(":{}", d.stride);
            parts.push_back(t);
          }
          break;
        case IndexerDim::Kind::index:
          parts.push_back(d.dynamic ? dyn_text() : fmt::format("{}", d.start));
          break;
        case IndexerDim::Kind::index_array: parts.push_back(dyn_text()); break;
      }
    }
    return fmt::format("[{}]", fmt::join(parts, ","));
  }

  // `ref[idx]` for operand 0 of a ref eqn whose dynamic operands start at `first_dyn`.
  bool ref_place(Names& n, const Eqn& e, size_t first_dyn, std::string& out) {
    const ParamValue* pv = e.params.find("indexer");
    const Indexer whole;
    const Indexer* idx = pv ? std::get_if<Indexer>(pv) : &whole;
    if (!idx || e.ins.size() != first_dyn + static_cast<size_t>(idx->num_dynamic())) return false;
    if (e.params.entries().size() > (pv ? 1u : 0u)) return false;
    if (!is_var(e.ins[0])) return false;
    Var r = as_var(e.ins[0]);
    if (r.id >= n.jaxpr.vars.size()) return false;
    const Shape& dims = n.jaxpr.vars[r.id].type.shape();
    std::span<const Atom> dyn(e.ins.data() + first_dyn, e.ins.size() - first_dyn);
    out = use(n, r) + indexer_text(n, *idx, dims, dyn);
    return true;
  }

  // JAX's custom forms for get, swap and addupdate; false (print generically) when the eqn
  // is malformed.
  bool print_ref_eqn(Names& n, const Eqn& e) {
    std::string place;
    switch (e.prim) {
      case Prim::get:
        if (e.outs.size() != 1 || e.ins.empty() || !ref_place(n, e, 1, place)) return false;
        out_ += binder(n, e.outs[0]) + " <- " + place;
        return true;
      case Prim::swap: {
        if (e.outs.size() != 1 || e.ins.size() < 2 || !ref_place(n, e, 2, place)) return false;
        bool dropped = e.outs[0].id < n.jaxpr.vars.size() && n.jaxpr.vars[e.outs[0].id].dropped;
        std::string val = atom(n, e.ins[1]);
        if (dropped) {
          out_ += place + " <- " + val;
        } else {
          out_ += binder(n, e.outs[0]) + ", " + place + " <- " + place + ", " + val;
        }
        return true;
      }
      case Prim::addupdate:
        if (!e.outs.empty() || e.ins.size() < 2 || !ref_place(n, e, 2, place)) return false;
        out_ += place + " += " + atom(n, e.ins[1]);
        return true;
      default: return false;
    }
  }

  std::string out_;
  uint64_t counter_ = 0;
  std::unordered_map<const Jaxpr*, std::string> shared_name_;
  std::vector<std::pair<const Jaxpr*, std::string>> shared_order_;
};

}  // namespace

std::string print_jaxpr(const Jaxpr& jaxpr) { return Printer().run(jaxpr); }

}  // namespace refjit
