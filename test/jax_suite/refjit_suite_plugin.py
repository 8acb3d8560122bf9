"""A pytest plugin that runs JAX's own test files with refjit in JAX's place.

Loaded by test/jax_suite/run.py (``-p refjit_suite_plugin``), never by the package's own tests. It swaps,
in each collected test module only, JAX's top-level transformations (``jax.jit``, ``grad``,
``value_and_grad``, ``vjp``, ``jvp``, ``linearize``) for refjit's, and the ones JAX's
``check_grads`` / ``check_jvp`` / ``check_vjp`` call; JAX's own modules keep theirs. Every
test's outcome is written as one JSON line to ``$REFJIT_SUITE_RESULTS``, with a class for each
failure (see ``classify``), so that the driver can count, group and survive a crash.

Environment:
  REFJIT_SUITE_RESULTS   file the outcomes are appended to (required)
  REFJIT_SUITE_MODE      ``refjit`` (default) or ``jax`` (the baseline: nothing swapped)
  REFJIT_SUITE_BACKEND   ``native`` (default) or ``interpreter``
  REFJIT_SUITE_SKIP      a file of test ids not to run (done already, or crashed)
  REFJIT_SUITE_TIMEOUT   seconds a test may take before it counts as a hang (default 120)
  REFJIT_SUITE_CHECKOUT  the JAX checkout: test helpers JAX's wheel leaves out
                         (jax/_src/hypothesis_test_util.py) are imported from it
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
import traceback
import types

import pytest

_MODE = os.environ.get("REFJIT_SUITE_MODE", "refjit")
_BACKEND = os.environ.get("REFJIT_SUITE_BACKEND", "native")
_RESULTS = os.environ["REFJIT_SUITE_RESULTS"]
_TIMEOUT = int(os.environ.get("REFJIT_SUITE_TIMEOUT", "120"))

_SWAPPED = ("jit", "grad", "value_and_grad", "vjp", "jvp", "linearize")

# Calls of refjit's functions made by the running test: a test that makes none never reached
# refjit, so its outcome says nothing about refjit.
_calls = {"n": 0}


def _counting(fun):
    @functools.wraps(fun)
    def counted(*args, **kwargs):
        _calls["n"] += 1
        return fun(*args, **kwargs)
    return counted


def _refjit_transforms() -> dict:
    import refjit

    out = {}
    for name in _SWAPPED:
        fun = getattr(refjit, name)
        if name in ("jit", "grad", "value_and_grad") and _BACKEND != "native":
            fun = functools.partial(fun, backend=_BACKEND)
        out[name] = _counting(fun)
    # jax.jit is often used as `partial(jax.jit, static_argnums=...)` and as a bare decorator:
    # both are calls of the same function, so one wrapper serves.
    return out


class _JaxWithRefjit(types.ModuleType):
    """The ``jax`` module as a test module sees it: refjit's transformations, JAX's rest."""

    def __init__(self, jax_module, swapped: dict):
        super().__init__("jax")
        self._jax = jax_module
        self.__dict__.update(swapped)

    def __getattr__(self, name):
        return getattr(self._jax, name)


class _ApiWithRefjit(types.ModuleType):
    """``jax._src.api`` as JAX's gradient checkers see it."""

    def __init__(self, api_module, swapped: dict):
        super().__init__("jax._src.api")
        self._api = api_module
        for name in ("jvp", "vjp", "linearize"):
            setattr(self, name, swapped[name])

    def __getattr__(self, name):
        return getattr(self._api, name)


_swapped: dict = {}


def _import_helpers_from_checkout() -> None:
    """JAX's wheel leaves out some modules its tests import; take them from the checkout."""
    import importlib.util

    import jax._src

    checkout = os.environ.get("REFJIT_SUITE_CHECKOUT")
    if not checkout:
        return
    for name in ("hypothesis_test_util",):
        full = f"jax._src.{name}"
        path = os.path.join(checkout, "jax", "_src", f"{name}.py")
        if full in sys.modules or importlib.util.find_spec(full) is not None or \
                not os.path.exists(path):
            continue
        spec = importlib.util.spec_from_file_location(full, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        setattr(jax._src, name, module)


def pytest_configure(config):
    _import_helpers_from_checkout()
    if _MODE != "refjit":
        return
    import jax
    from jax._src import api, public_test_util

    _swapped.update(_refjit_transforms())
    public_test_util.api = _ApiWithRefjit(api, _swapped)
    config._refjit_jax = _JaxWithRefjit(jax, _swapped)


def _swap_module_globals(module, config):
    import jax

    if getattr(module, "_refjit_swapped", False):
        return
    module._refjit_swapped = True
    for key, value in list(vars(module).items()):
        if value is jax:
            setattr(module, key, config._refjit_jax)
        else:
            for name in _SWAPPED:
                if value is getattr(jax, name):
                    setattr(module, key, _swapped[name])


def pytest_collection_modifyitems(session, config, items):
    skip_file = os.environ.get("REFJIT_SUITE_SKIP")
    if skip_file and os.path.exists(skip_file):
        with open(skip_file) as f:
            skip = {line.strip() for line in f if line.strip()}
        kept = [it for it in items if it.nodeid not in skip]
        config.hook.pytest_deselected(items=[it for it in items if it.nodeid in skip])
        items[:] = kept
    if _MODE == "refjit":
        for item in items:
            module = getattr(item, "module", None)
            if module is not None:
                _swap_module_globals(module, config)


def _write(record: dict) -> None:
    with open(_RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


class _Hang(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Hang(f"the test ran longer than {_TIMEOUT} s")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location):
    _write({"id": nodeid, "event": "start"})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _calls["n"] = 0
    item._refjit_outcome = None
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(_TIMEOUT)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    outcome = item._refjit_outcome or {"outcome": "passed"}
    outcome.update(id=item.nodeid, event="end", calls=_calls["n"],
                   seconds=round(time.monotonic() - start, 3))
    _write(outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    result = yield
    report = result.get_result()
    if report.skipped and item._refjit_outcome is None:
        item._refjit_outcome = {"outcome": "skipped"}
    elif report.failed and (item._refjit_outcome is None
                            or item._refjit_outcome["outcome"] != "failed"):
        kind, message, where = classify(call.excinfo)
        item._refjit_outcome = {"outcome": "failed", "kind": kind, "message": message,
                                "where": where, "phase": call.when}


# ---- failure classes --------------------------------------------------------------------

# A refjit failure is one of:
#   gap             refjit refused loudly (an error of its own naming what it does not do)
#   wrong-number    a value differs from JAX's (or from the test's reference)
#   wrong-dtype     a result's dtype or weak type differs from JAX's
#   missing-error   JAX raises an error here and refjit did not
#   different-error both raise, but refjit's error is not the class or text the test expects
#   internal-error  an error refjit did not mean to raise (C++ exceptions, verifier failures,
#                   Python errors from inside the package)
#   hang            the test ran past the time limit
#   crash           the process died (recorded by the driver, not here)
#   other           anything else

_NUMBER_CHECKS = ("assertAllClose", "assert_allclose", "_assert_numpy_allclose", "check_close",
                  "assertArraysAllClose", "assertArraysEqual", "assert_array_equal",
                  "assert_equal", "check_jvp", "check_vjp", "assert_array_almost_equal")
_INTERNAL_TEXT = ("internal error", "verifier", "std::", "bad_cast", "bad_alloc",
                  "failed to legalize", "failed to lower", "assertion", "unreachable",
                  "does not dominate", "llvm error", "mlir")


def _package_frames(tb) -> list:
    return [fr for fr in traceback.extract_tb(tb)
            if f"{os.sep}refjit{os.sep}" in fr.filename and "jax_suite" not in fr.filename]


def classify(excinfo) -> tuple[str, str, str]:
    if excinfo is None:
        return "other", "", ""
    exc = excinfo.value
    message = f"{type(exc).__name__}: {exc}"
    short = message[:2000]
    frames = traceback.extract_tb(excinfo.tb)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    names = {fr.name for fr in frames}
    text = str(exc).lower()
    try:
        import refjit
        refjit_error = isinstance(exc, refjit.Error)
    except ImportError:
        refjit_error = False

    if isinstance(exc, _Hang):
        return "hang", short, where
    if isinstance(exc, AssertionError):
        if "not raised" in text:
            return "missing-error", short, where
        if "does not match" in text:
            return "different-error", short, where
        # numpy's number mismatches name the dtype too ("Not equal to tolerance ...
        # dtype=float32"), so they are looked for first.
        if "not equal to tolerance" in text or "mismatched elements" in text:
            return "wrong-number", short, where
        # assertIn / assertNotIn on program text (a jaxpr, HLO): an inspection of JAX's
        # internals, whose text may well name a dtype.
        if "unexpectedly found in" in text or "not found in" in text:
            return "other", short, where
        if "dtype" in text or "weak_type" in text or "_check_dtypes_match" in names:
            return "wrong-dtype", short, where
        if names & set(_NUMBER_CHECKS) or "not equal" in text or "mismatch" in text:
            return "wrong-number", short, where
        return "other", short, where
    if refjit_error:
        if any(t in text for t in _INTERNAL_TEXT):
            return "internal-error", short, where
        return "gap", short, where
    package = _package_frames(excinfo.tb)
    if type(exc) is RuntimeError and package:
        # refjit._core raises RuntimeError only for C++ exceptions it did not mean to throw.
        return "internal-error", short, where
    if isinstance(exc, (TypeError, ValueError, NotImplementedError)) and \
            str(exc).startswith("refjit"):
        return "gap", short, where
    if package and isinstance(exc, (AttributeError, KeyError, IndexError, TypeError,
                                    ValueError, UnboundLocalError, ZeroDivisionError)):
        return "internal-error", short, where
    # An error JAX raised while refjit was tracing (a tracer where refjit wanted an array,
    # an argument refjit.jit does not take): refjit cannot do this yet.
    if package or type(exc).__name__ in ("TracerArrayConversionError",
                                         "TracerBoolConversionError",
                                         "ConcretizationTypeError"):
        return "gap", short, where
    return "other", short, where
