"""Shared helpers of the package's tests: JAX's values are the reference."""

import os

import numpy as np
import pytest

# Compiled code's outputs start as 0xff bytes instead of unspecified memory, so an element the
# code forgot to write fails a comparison (as in the C++ suites; docs/testing.md).
os.environ.setdefault("REFJIT_POISON_OUTPUTS", "1")


def assert_tree_close(actual, expected, rtol=2e-5, atol=1e-6, *, numpy_result=True):
    """Every leaf of ``actual`` (refjit's NumPy arrays; JAX arrays where a JAX transformation
    is outermost, ``numpy_result=False``) equals JAX's within tolerance, and the structures are
    the same."""
    import jax

    a_leaves, a_tree = jax.tree_util.tree_flatten(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"structure {a_tree} != {e_tree}"
    for a, e in zip(a_leaves, e_leaves):
        if numpy_result:
            assert isinstance(a, np.ndarray), \
                f"refjit returned {type(a).__name__}, not a NumPy array"
        e = np.asarray(e)
        assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"dtype {a.dtype} != {e.dtype}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def finite_difference(f, x, eps=1e-3):
    """Central differences of a scalar function of one float64 array (the independent check
    of gradients that do not come from JAX)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f((x + d).astype(np.float32))) - float(f((x - d).astype(np.float32)))) / (
            2 * eps)
    return g


@pytest.fixture
def rng():
    return np.random.default_rng(0)
