"""The type of the arrays refjit's compiled functions return."""

from __future__ import annotations

import numpy as np


class Array(np.ndarray):
    """A NumPy array that refjit computed. It is complete when the call returns, so JAX's
    ``x.block_until_ready()`` and ``jax.block_until_ready(tree)`` return it at once (on a plain
    NumPy array the first raises AttributeError, and the second pays for that exception on
    every leaf: a fifth of a small training step's time). Slices and reshapes of it are
    ``Array`` too; what NumPy computes from it (``x + 1``, ``x.sum()``) is a plain NumPy array
    or scalar, as from any other array. refjit and JAX take it wherever they take NumPy
    arrays."""

    def block_until_ready(self) -> Array:
        return self

    def __array_wrap__(self, array, context=None, return_scalar=False):
        if type(array) is Array:  # written into an `out=` that is one (`x += 1`): that array
            return array
        plain = array.view(np.ndarray)
        return plain[()] if return_scalar else plain


# The array classes refjit takes as they are, checked by exact type on every call's leaves:
# NumPy's own, and the one refjit returns.
NUMPY_ARRAYS = (np.ndarray, Array)
