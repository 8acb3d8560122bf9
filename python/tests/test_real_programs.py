"""Real-style training programs (python/tests/real_programs/: flax linen and NNX with optax,
and plain JAX) trained for a few steps three ways: `jax.jit` of the user's step, `refjit.jit`
of the same step unchanged, and `refjit.jit` of the step with refjit.value_and_grad in place of
JAX's. Every leaf of the training state and of the metrics must follow JAX's at every step."""
import importlib
import pkgutil

import jax
import numpy as np
import pytest
from conftest import assert_tree_close

import real_programs
import refjit

PROGRAMS = sorted(m.name for m in pkgutil.iter_modules(real_programs.__path__))


def train(step, program):
    state, history = program.state, []
    for batch in program.batches:
        state, metrics = step(state, batch)
        history.append((state, metrics))
    return history


def leaves_as_numpy(tree):
    # Typed PRNG keys compare as their key data.
    def plain(x):
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    return jax.tree_util.tree_map(plain, tree)


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("gradient", ["jax.value_and_grad", "refjit.value_and_grad"])
def test_trains_with_jaxs_numbers(name, gradient):
    module = importlib.import_module(f"real_programs.{name}")
    expected = train(jax.jit(module.make(jax.value_and_grad).step),
                     module.make(jax.value_and_grad))
    value_and_grad = jax.value_and_grad if gradient == "jax.value_and_grad" else \
        refjit.value_and_grad
    program = module.make(value_and_grad)
    actual = train(refjit.jit(program.step), program)
    assert len(actual) == len(expected) > 1
    for k, (got, want) in enumerate(zip(actual, expected)):
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want), k
        assert_tree_close(leaves_as_numpy(got), leaves_as_numpy(want), rtol=program.rtol,
                          atol=program.atol)
