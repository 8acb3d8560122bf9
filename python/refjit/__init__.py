"""refjit for JAX users: compile JAX functions with refjit, differentiate them with
refjit's copy-free reverse mode (docs/python.md).

    import jax.numpy as jnp, refjit

    def loss(w, x):
        return jnp.sum(jnp.tanh(x * w) ** 2)

    refjit.jit(loss)(2.0, x)        # refjit's native code
    refjit.grad(loss)(2.0, x)       # refjit's gradient

Functions are traced with ``jax.make_jaxpr`` (JAX is the package's tracing dependency);
everything after the trace is refjit's: its passes, its autodiff, its compiled code.
"""

from . import _callbacks  # noqa: F401  (jax.debug.print and callbacks print for refjit)
from ._array import Array
from ._common import (clear_cache, compilation_cache_dir, compilation_cache_stats, primitives,
                      set_compilation_cache_dir, set_log_compiles)
from ._errors import (Error, ParseError, RefError, ReverseModeError, TraceError,
                      TypeCheckError)
from ._forward import jvp, linearize
from ._grad import grad, value_and_grad
from ._inspect import Jaxpr, compile, make_jaxpr
from ._jit import jit
from ._vjp import DontWant, GradValue, VjpFunction, vjp
from . import distributed

__version__ = "0.1.0"

__all__ = [
    "Array",
    "DontWant",
    "Error",
    "GradValue",
    "Jaxpr",
    "ParseError",
    "RefError",
    "ReverseModeError",
    "TraceError",
    "TypeCheckError",
    "VjpFunction",
    "clear_cache",
    "compilation_cache_dir",
    "compilation_cache_stats",
    "compile",
    "distributed",
    "grad",
    "jit",
    "jvp",
    "linearize",
    "make_jaxpr",
    "primitives",
    "set_compilation_cache_dir",
    "set_log_compiles",
    "value_and_grad",
    "vjp",
]
