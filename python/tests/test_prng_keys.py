"""Typed PRNG keys (jax.random.key) as arguments and results, alone and in pytrees (a training
state's rng), and the legacy uint32 keys: bits and values exactly JAX's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close

import refjit


def train_step(state):
    rng, sub = jax.random.split(state["rng"])
    noise = jax.random.uniform(sub, state["x"].shape)
    return {"rng": rng, "x": state["x"] * 0.5 + noise}


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_a_key_in_a_training_state_comes_back_a_key(backend):
    mine = theirs = {"rng": jax.random.key(42), "x": np.zeros(3, np.float32)}
    step = refjit.jit(train_step, backend=backend)
    for _ in range(3):
        mine, theirs = step(mine), jax.jit(train_step)(theirs)
        assert jax.dtypes.issubdtype(mine["rng"].dtype, jax.dtypes.prng_key)
        # (The first result is wrapped by JAX's wrap_key_data, later ones directly: the same.)
        assert type(mine["rng"]) is type(theirs["rng"]) and mine["rng"].dtype == theirs["rng"].dtype
        np.testing.assert_array_equal(jax.random.key_data(mine["rng"]),
                                      jax.random.key_data(theirs["rng"]))
        np.testing.assert_array_equal(mine["x"], theirs["x"])


def test_key_arrays_batched_keys_and_gradients():
    keys = jax.random.split(jax.random.key(1), 4)
    bits = lambda ks: jax.vmap(lambda k: jax.random.bits(k, (2,)))(ks)  # noqa: E731
    np.testing.assert_array_equal(refjit.jit(bits)(keys), bits(keys))
    loss = lambda w, k: jnp.sum(w * jax.random.normal(k, w.shape) ** 2)  # noqa: E731
    w = np.array([1.0, -2.0, 0.5], np.float32)
    assert_tree_close(refjit.grad(loss)(w, jax.random.key(3)), jax.grad(loss)(w, jax.random.key(3)),
                      rtol=1e-5)


def test_a_legacy_key_of_the_same_shape_is_a_different_program():
    # key(0) traces as key<fry>[], PRNGKey(0) as u32[2]: the compile cache tells them apart.
    f = refjit.jit(lambda k: jax.random.split(k))
    typed, legacy = f(jax.random.key(0)), f(jax.random.PRNGKey(0))
    assert jax.dtypes.issubdtype(typed.dtype, jax.dtypes.prng_key)
    assert legacy.dtype == np.uint32 and legacy.shape == (2, 2)
    np.testing.assert_array_equal(jax.random.key_data(typed), legacy)
    np.testing.assert_array_equal(legacy, jax.random.split(jax.random.PRNGKey(0)))


def test_other_key_implementations_are_refused_by_name():
    key = jax.random.key(0, impl="rbg")
    with pytest.raises(TypeError, match="rbg.*threefry"):
        refjit.jit(lambda k: jax.random.normal(k))(key)


def test_a_typed_key_passed_to_a_nested_refjit_gradient():
    # refjit.grad inside refjit.jit sees the key as a tracer of a key type (a VAE's step).
    def loss(w, key):
        return jnp.sum((w * jax.random.normal(key, w.shape)) ** 2)

    def step(w, key):
        key, sample = jax.random.split(key)
        return w - 0.1 * refjit.grad(loss)(w, sample), key

    w = np.arange(3, dtype=np.float32)
    got_w, got_key = refjit.jit(step)(w, jax.random.key(3))
    want_w, want_key = jax.jit(lambda w, k: (w - 0.1 * jax.grad(loss)(w, jax.random.split(k)[1]),
                                             jax.random.split(k)[0]))(w, jax.random.key(3))
    np.testing.assert_allclose(got_w, want_w, rtol=1e-6)
    np.testing.assert_array_equal(jax.random.key_data(got_key), jax.random.key_data(want_key))
