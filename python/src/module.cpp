// refjit._core: the C++ side of the Python package (python/refjit/). It parses jaxpr text,
// applies refjit's transformations to it, compiles it and runs it on NumPy arrays; the
// package's Python code traces JAX functions and handles pytrees.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "driver/derive.h"
#include "driver/pipeline.h"
#include "passes/ad/jvp.h"
#include "passes/ad/transpose.h"
#include "passes/ad/vjp.h"
#include "passes/batching/vmap.h"
#include "passes/discharge.h"
#include "python/src/arrays.h"
#include "python/src/distributed.h"
#include "python/src/executable.h"
#include "python/src/host_calls.h"
#include "refjit/aot.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/jit.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace refjit::python {

namespace {

// One jaxpr, as the transformations pass it around.
struct Program {
  Jaxpr jaxpr;
};

// (NumPy's name of the dtype, the shape, whether it is a ref, refjit's spelling "f32[3]").
nb::tuple type_tuple(const Type& t) {
  nb::list shape;
  for (int64_t d : t.array.shape) shape.append(d);
  return nb::make_tuple(std::string(long_name(t.array.dtype)), nb::tuple(shape), t.is_ref, t.str());
}

template <class V>
nb::list types_of(const Jaxpr& j, const std::vector<V>& vars) {
  nb::list out;
  for (const V& v : vars) out.append(type_tuple(j.type_of(v)));
  return out;
}

// The program as every door differentiates it (driver/derive.h), told the ranges of the
// constants' values when they are given.
Differentiable differentiable(const Program& p, const nb::list& consts) {
  if (nb::len(consts) == 0) return Differentiable(p.jaxpr);
  const KnownConsts known = KnownConsts::of(const_values(p.jaxpr, consts));
  return Differentiable(p.jaxpr, known.int_range, known.fold);
}

std::vector<AccumKind> accum_kinds(const std::vector<std::string>& names) {
  std::vector<AccumKind> kinds;
  for (const std::string& n : names) {
    if (n == "value")
      kinds.push_back(AccumKind::value);
    else if (n == "ref")
      kinds.push_back(AccumKind::ref);
    else if (n == "dont_want")
      kinds.push_back(AccumKind::dont_want);
    else
      throw nb::value_error(
          fmt::format("unknown accumulator kind '{}' (value, ref or dont_want)", n).c_str());
  }
  return kinds;
}

// refjit's errors become the package's exception classes (refjit/_errors.py), which carry
// the E-code and, for parse errors, the position.
void translate_errors(const std::exception_ptr& p, void*) {
  nb::module_ errors = nb::module_::import_("refjit._errors");
  auto raise = [](nb::object instance) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
  };
  try {
    std::rethrow_exception(p);
  } catch (const ParseError& e) {
    raise(errors.attr("ParseError")(e.what(), e.file(), e.line(), e.col()));
  } catch (const RefError& e) {
    raise(errors.attr("RefError")(e.what(), e.code()));
  } catch (const TypeError& e) {
    raise(errors.attr("TypeCheckError")(e.what()));
  } catch (const ReverseModeError& e) {
    raise(errors.attr("ReverseModeError")(e.what()));
  } catch (const Error& e) {
    raise(errors.attr("Error")(e.what()));
  }
}

}  // namespace

}  // namespace refjit::python

using namespace refjit;
using namespace refjit::python;

NB_MODULE(_core, m) {
  m.doc() = "refjit's compiler and runtime (used by the refjit package; not a public API)";
  nb::register_exception_translator(translate_errors);
  refjit::python::import_numpy();

  nb::class_<Program>(m, "Program")
      .def_prop_ro("text", [](const Program& p) { return print_jaxpr(p.jaxpr); })
      .def_prop_ro("num_consts", [](const Program& p) { return p.jaxpr.constvars.size(); })
      .def_prop_ro("input_types",
                   [](const Program& p) { return types_of(p.jaxpr, p.jaxpr.invars); })
      .def_prop_ro("const_types",
                   [](const Program& p) { return types_of(p.jaxpr, p.jaxpr.constvars); })
      .def_prop_ro("output_types",
                   [](const Program& p) { return types_of(p.jaxpr, p.jaxpr.outvars); })
      .def(
          "emit",
          [](const Program& p, const std::string& stage, const nb::list& consts) {
            PipelineOptions options;
            if (nb::len(consts) > 0)
              options.consts = KnownConsts::of(const_values(p.jaxpr, consts));
            nb::gil_scoped_release unlocked;
            return emit_after(p.jaxpr, stage, options);
          },
          "stage"_a, "consts"_a = nb::list(),
          "The program after pipeline pass `stage` (refjit dump --emit=STAGE), specialised to "
          "the constants' values when given, as compiling does.")
      .def("__str__", [](const Program& p) { return print_jaxpr(p.jaxpr); });

  m.def("set_compilation_cache_dir", &set_compilation_cache_dir, "dir"_a);
  m.def("compilation_cache_dir", &compilation_cache_dir);
  m.def("compilation_cache_stats", [] {
    const CompilationCacheStats s = compilation_cache_stats();
    return std::make_tuple(s.hits, s.misses, s.errors);
  });

  m.def("readable_primitives", &readable_primitives,
        "The primitive names jaxpr text may use, sorted (refjit's own and the JAX primitives "
        "read as rewrites of them).");

  m.def(
      "parse",
      [](const std::string& text, const std::string& source,
         const std::vector<std::pair<std::string, const Program*>>& known) {
        NamedJaxprs named;
        for (const auto& [name, program] : known)
          named.emplace(name, std::make_shared<const Jaxpr>(program->jaxpr));
        return Program{parse_jaxpr(text, source, named)};
      },
      "text"_a, "source"_a, "known"_a = std::vector<std::pair<std::string, const Program*>>{},
      "Parses and verifies jaxpr text (refjit's or JAX's syntax). `known`: (name, program) "
      "pairs the text may name as `jaxpr=NAME` without a `let` (staged refjit programs).");

  m.def(
      "outputs_from_inputs",
      [](const Program& p, const std::vector<std::pair<int, int>>& pairs) {
        Jaxpr j = p.jaxpr;
        for (const auto& [at, input] : pairs) {
          if (input < 0 || static_cast<size_t>(input) >= j.invars.size() || at < 0 ||
              static_cast<size_t>(at) > j.outvars.size())
            throw nb::index_error(
                fmt::format("output {} from input {} of a program with {} inputs and {} outputs",
                            at, input, j.invars.size(), j.outvars.size())
                    .c_str());
          j.outvars.insert(j.outvars.begin() + at, Atom(j.invars[static_cast<size_t>(input)]));
        }
        // Not verified on its own: a jaxpr returning a ref is only valid as a fwd rule, which
        // the program holding it verifies as such.
        return Program{std::move(j)};
      },
      "program"_a, "pairs"_a,
      "The program with input `input` inserted as output `at`, for each (at, input) pair in "
      "increasing `at` (a custom_vjp fwd rule passing its own ref argument on as a residual).");

  m.def(
      "consts_to_inputs",
      [](const Program& p, const std::vector<int>& which) {
        Jaxpr j = p.jaxpr;
        std::vector<bool> moved(j.constvars.size(), false);
        for (int k : which) {
          if (k < 0 || static_cast<size_t>(k) >= moved.size())
            throw nb::index_error(
                fmt::format("constvar {} of a program with {}", k, moved.size()).c_str());
          moved[k] = true;
        }
        std::vector<Var> kept;
        for (size_t k = 0; k < j.constvars.size(); ++k)
          if (!moved[k]) kept.push_back(j.constvars[k]);
        for (int k : which) j.invars.push_back(p.jaxpr.constvars[k]);
        j.constvars = std::move(kept);
        return Program{std::move(j)};
      },
      "program"_a, "which"_a,
      "The program with constvars `which` taken as inputs instead, after the others, in that "
      "order (the refs a traced function closes over: read and written at each call).");

  m.def(
      "grad",
      [](const Program& p, const std::vector<int>& wrt, int num_aux, const nb::list& consts) {
        return Program{differentiable(p, consts).grad(wrt, num_aux)};
      },
      "program"_a, "wrt"_a, "num_aux"_a, "consts"_a = nb::list(),
      "outputs then gradients: f's outputs (the loss, then the auxiliary ones), then d loss / "
      "d invar[w] for w in wrt");

  m.def(
      "jvp",
      [](const Program& p, const std::vector<bool>& nonzero, const nb::list& consts) {
        return Program{differentiable(p, consts).jvp(nonzero)};
      },
      "program"_a, "nonzero"_a, "consts"_a = nb::list(),
      "primals, then a tangent per invar with nonzero[i] -> outputs, then their tangents");

  m.def(
      "linearize",
      [](const Program& p, const std::vector<bool>& differentiated, const nb::list& consts) {
        Linearized l = differentiable(p, consts).linearize(differentiated);
        if (!l.ref_residuals.empty())
          throw Error(
              "linearize: the linear part needs one of the function's own refs again, "
              "which the Python package cannot pass; use the C++ API");
        return nb::make_tuple(Program{std::move(l.primal)}, Program{std::move(l.linear)},
                              l.num_residuals);
      },
      "program"_a, "differentiated"_a, "consts"_a = nb::list(),
      "(primal, linear, num_residuals): primal gives the outputs then the residuals; linear "
      "takes the residuals then one tangent per differentiated input");

  m.def(
      "vjp",
      [](const Program& p, const std::vector<bool>& differentiated,
         const std::vector<std::string>& kinds, const nb::list& consts) {
        VjpJaxprs v = differentiable(p, consts).vjp(differentiated, accum_kinds(kinds));
        return nb::make_tuple(Program{std::move(v.forward)}, Program{std::move(v.backward)},
                              v.num_residuals, v.ref_residuals);
      },
      "program"_a, "differentiated"_a, "kinds"_a, "consts"_a = nb::list(),
      "(forward, backward, num_residuals, ref_residuals): forward gives the outputs then the "
      "residuals; backward takes the residuals, the function's refs at the positions "
      "ref_residuals names (among its constvars, then its invars) again, a ref per `ref` "
      "accumulator, then one cotangent per output, and returns one cotangent per `value` "
      "accumulator");

  m.def(
      "transpose",
      [](const Program& p, int num_nonlinear, const std::vector<std::string>& kinds) {
        return Program{transpose_jaxpr(p.jaxpr, num_nonlinear, accum_kinds(kinds))};
      },
      "program"_a, "num_nonlinear"_a, "kinds"_a,
      "The transpose of a linear program whose first `num_nonlinear` inputs are residuals: it "
      "takes the residuals, a ref per `ref` accumulator, then one cotangent per output, and "
      "returns one cotangent per `value` linear input.");

  m.def(
      "discharge", [](const Program& p) { return Program{discharge_state(p.jaxpr)}; }, "program"_a,
      "The program with each ref input taken as the value it holds: it returns its outputs, "
      "then the final value of each ref input in order (JAX's state discharge).");

  m.def(
      "vmap",
      [](const Program& p, const std::vector<bool>& in_batched, int64_t size) {
        BatchedJaxpr b = vmap_jaxpr(p.jaxpr, in_batched, size);
        return nb::make_tuple(Program{std::move(b.jaxpr)}, b.out_batched);
      },
      "program"_a, "in_batched"_a, "size"_a,
      "(batched program, out_batched): the program over a batch of `size` examples; a batched "
      "input or output has the batch as its leading dim.");

  m.def(
      "compile_object",
      [](const Program& p, const std::string& name, const std::string& object_path,
         const std::string& header_path, const std::string& mode, const std::vector<int>& wrt,
         const std::vector<std::string>& accum, const std::string& cpu, bool exact_math,
         const std::string& source) {
        AotOptions a;
        a.name = name;
        a.object_path = object_path;
        a.header_path = header_path;
        a.cpu = cpu;
        a.exact_math = exact_math;
        a.source_name = source;
        a.wrt = wrt;
        if (mode == "forward")
          a.mode = AotMode::function;
        else if (mode == "grad")
          a.mode = AotMode::grad;
        else if (mode == "vjp")
          a.mode = AotMode::vjp;
        else if (mode == "jvp")
          a.mode = AotMode::jvp;
        else
          throw nb::value_error(
              fmt::format("unknown mode '{}' (forward, grad, vjp or jvp)", mode).c_str());
        for (const std::string& k : accum)
          a.accum.push_back(k == "value" ? AotAccum::value
                            : k == "ref" ? AotAccum::ref
                                         : AotAccum::dont_want);
        AotArtifact art;
        {
          nb::gil_scoped_release unlocked;
          art = compile_to_object(p.jaxpr, a);
        }
        return nb::make_tuple(art.symbols, art.residual_bytes);
      },
      "program"_a, "name"_a, "object_path"_a, "header_path"_a, "mode"_a, "wrt"_a, "accum"_a,
      "cpu"_a, "exact_math"_a, "source"_a,
      "Writes an object file and a C header (docs/aot.md); returns (symbols, residual_bytes).");

  nb::class_<Executable>(m, "Executable")
      .def(
          "__init__",
          [](Executable* self, const Program& p, const nb::list& consts, bool interpret,
             const std::vector<bool>& donated, bool exact_math, int opt_level) {
            new (self) Executable(p.jaxpr, consts,
                                  ExecutableOptions{interpret, donated, exact_math, opt_level});
          },
          "program"_a, "consts"_a, "interpret"_a = false, "donated"_a = std::vector<bool>{},
          "exact_math"_a = false, "opt_level"_a = 3)
      .def("__call__", &Executable::call, "args"_a)
      .def_prop_ro("num_inputs", &Executable::num_inputs)
      .def_prop_ro("workspace_bytes", &Executable::workspace_bytes)
      .def_prop_ro("compile_ms", &Executable::compile_ms)
      .def_prop_ro("ffi_id", &Executable::ffi_id);
  bind_host_calls(m);
  bind_distributed(m);
  m.def("have_xla_ffi", &have_xla_ffi,
        "Whether this build can run refjit code as XLA's custom call refjit_call.");
  m.def("xla_ffi_handler", &xla_ffi_handler,
        "The custom call's handler, a PyCapsule for jax.ffi.register_ffi_target.");
}
