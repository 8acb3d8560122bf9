"""JAX users' programs through refjit.jit and refjit.grad, against JAX's numbers: scans,
conds, gathers and scatters, a softmax cross-entropy, and the seed's five insert modes
(small sizes; scripts/bench.sh python runs the seed's own sizes)."""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close
from jax import lax

import refjit


def check_jit_and_grad(f, *args, argnums=0, rtol=2e-5, atol=1e-6):
    assert_tree_close(refjit.jit(f)(*args), jax.jit(f)(*args), rtol=rtol, atol=atol)
    assert_tree_close(refjit.grad(f, argnums=argnums)(*args),
                      jax.grad(f, argnums=argnums)(*args), rtol=rtol, atol=atol)


def test_rnn_scan(rng):
    def loss(w, h0, xs):
        def step(h, x):
            h = jnp.tanh(w @ h + x)
            return h, h.sum()

        h, ys = lax.scan(step, h0, xs)
        return jnp.sum(h ** 2) + jnp.sum(ys)

    w = (rng.standard_normal((6, 6)) * 0.3).astype(np.float32)
    h0 = rng.standard_normal(6).astype(np.float32)
    xs = rng.standard_normal((7, 6)).astype(np.float32)
    check_jit_and_grad(loss, w, h0, xs, argnums=(0, 1, 2), rtol=1e-4, atol=1e-5)


def test_cond_and_switch(rng):
    def f(x, k):
        y = lax.cond(x.sum() > 0, lambda v: jnp.sin(v) * 2, lambda v: v ** 3, x)
        z = lax.switch(k, [jnp.cos, jnp.exp, lambda v: -v], y)
        return jnp.sum(z * y)

    for sign in (1, -1):
        x = (sign * np.abs(rng.standard_normal(4))).astype(np.float32)
        for k in (0, 1, 2, 7):  # switch clamps 7 to the last branch
            check_jit_and_grad(f, x, np.int32(k))


def test_convolution_layer(rng):
    # A small CNN layer: a strided, grouped NHWC convolution, its bias and a relu-free
    # nonlinearity; JAX's gradient of it is itself a pair of convolutions.
    def loss(x, k, b):
        y = lax.conv_general_dilated(x, k, (2, 1), "SAME", feature_group_count=2,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.tanh(y + b) ** 2)

    x = rng.standard_normal((2, 7, 6, 4)).astype(np.float32)
    k = (rng.standard_normal((3, 3, 2, 6)) * 0.3).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    check_jit_and_grad(loss, x, k, b, argnums=(0, 1, 2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strides, padding, dilation, shape", [
    ((1, 1), "SAME", (1, 1), (2, 9, 10, 3)),          # every product implicit, ct convolved
    ((1, 1), "VALID", (1, 1), (2, 9, 10, 3)),
    ((1, 1), ((2, 0), (1, 3)), (2, 1), (1, 8, 9, 2)),  # asymmetric padding, dilated kernel
    ((2, 2), "SAME", (1, 1), (2, 9, 10, 3)),          # strided: the input's gradient stays
    ((1, 1), "SAME", (1, 1), (1, 3, 4, 2)),            # windows under half the input: kept
])
def test_convolution_products_read_the_input_in_place(rng, strides, padding, dilation, shape):
    # The implicit-im2col pass (docs/pipeline.md) rewrites the forward product, the kernel's
    # gradient and, where windows cover most of the input, the input's gradient; refjit's
    # numbers stay JAX's for every geometry, rewritten or not.
    def loss(x, k):
        y = lax.conv_general_dilated(x, k, strides, padding, rhs_dilation=dilation,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.tanh(y) ** 2)

    x = rng.standard_normal(shape).astype(np.float32)
    k = (rng.standard_normal((3, 3, shape[-1], 5)) * 0.3).astype(np.float32)
    check_jit_and_grad(loss, x, k, argnums=(0, 1), rtol=1e-4, atol=1e-5)


def test_gather_and_scatter_add(rng):
    def f(table, idx, updates):
        rows = table[idx]                        # gather
        t = table.at[idx].add(updates * 2.0)     # scatter-add, a repeated index
        return jnp.sum(rows ** 2) + jnp.sum(jnp.tanh(t))

    table = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([4, 0, 4, 5], np.int32)
    updates = rng.standard_normal((4, 3)).astype(np.float32)
    check_jit_and_grad(f, table, idx, updates, argnums=(0, 2))


def test_take_along_axis_with_out_of_range_indices(rng):
    def f(x, idx):
        return jnp.sum(jnp.take_along_axis(x, idx, axis=1, mode="clip") * x[:, :1])

    x = rng.standard_normal((3, 5)).astype(np.float32)
    idx = np.array([[0, 9], [4, -3], [2, 2]], np.int32)
    check_jit_and_grad(f, x, idx)


def test_softmax_cross_entropy(rng):
    def loss(logits, labels):
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    logits = rng.standard_normal((8, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 8).astype(np.int32)
    check_jit_and_grad(loss, logits, labels)


def test_fori_loop_with_refs():
    def f(x):
        acc = jax.new_ref(jnp.zeros(()))

        def body(i, _):
            acc[...] += x[i] * i
            return _

        lax.fori_loop(0, x.shape[0], body, None)
        return acc[...] * 2

    x = np.arange(5, dtype=np.float32)
    assert float(refjit.jit(f)(x)) == 2 * sum(i * i for i in range(5))
    np.testing.assert_allclose(refjit.grad(f)(x), 2 * np.arange(5))


# ---- the seeds (grad-scan-slice-update-slow), their code as examples/python has it -------
#
# The seed's modules run at small sizes: their functions read these module constants when
# traced (set once, before any is traced).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"))
import flax_step_with_refjit  # noqa: E402
import seed_custom_vjp  # noqa: E402
import seed_insert  # noqa: E402

for _seed in (seed_insert, seed_custom_vjp):
    _seed.N_STEPS, _seed.N_ROWS, _seed.N_COLS = 40, 6, 10


@pytest.mark.parametrize("repeats", [1, 3])
@pytest.mark.parametrize("mode", seed_insert.MODES)
def test_seed_loss_and_gradient_match_jax(mode, repeats):
    f = seed_insert.loss_fns(n_row_repeats=repeats)[mode]
    w = np.float32(2)
    assert_tree_close(refjit.jit(f)(w), jax.jit(f)(w), rtol=1e-5)
    assert_tree_close(refjit.grad(f)(w), jax.grad(f)(w), rtol=1e-4, atol=1e-7)
    out, t = refjit.jvp(f, (w,), (np.float32(1),))
    assert_tree_close(t, jax.grad(f)(w), rtol=1e-4, atol=1e-7)


def test_flax_optax_step_calling_the_seed_through_refjit_trains_as_jax_does():
    # examples/python/flax_step_with_refjit.py: the seed's scan inside a jax.jit train step,
    # as XLA's custom call into refjit; three adam steps give JAX's losses and parameters.
    r = flax_step_with_refjit.run(steps=3)
    np.testing.assert_allclose(r["refjit_losses"], r["jax_losses"], rtol=1e-5)
    assert r["refjit_losses"][-1] < r["refjit_losses"][0]
    assert r["max_param_diff"] < 1e-5


@pytest.mark.parametrize("fn", ["simple_insert", "bad_insert", "slow_insert", "fast_insert"])
def test_seed_custom_vjp_inserts_use_their_rules_as_jax_does(fn):
    # bad_insert's rule is wrong on purpose: its gradient differs from the true one in JAX
    # (the seed prints 0.0017259 against 0.00052476), and must differ the same way here.
    f = seed_custom_vjp.loss_fns()[fn]
    w = np.float32(2)
    assert_tree_close(refjit.grad(f)(w), jax.grad(f)(w), rtol=1e-4, atol=1e-7)


def test_checkpoint_with_a_policy(rng):
    from jax.ad_checkpoint import checkpoint_name

    def loss(w, x):
        def layer(h):
            h = checkpoint_name(jnp.tanh(h @ w), "act")
            return jnp.sin(h) * h

        policy = jax.checkpoint_policies.save_only_these_names("act")
        return jnp.sum(jax.checkpoint(layer, policy=policy)(jax.checkpoint(layer)(x)) ** 2)

    w = (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    check_jit_and_grad(loss, w, x, argnums=(0, 1), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
def test_total_order_comparisons(dtype):
    # lt_to / le_to / eq_to order -NaN < -inf < -0.0 < +0.0 < +inf < +NaN.
    a = np.array([-0.0, 0.0, np.nan, -np.nan, 1.0, 2.0, -3.0]).astype(dtype)
    b = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 2.0, -3.0]).astype(dtype)
    for p in (lax.lt_to_p, lax.le_to_p, lax.eq_to_p):
        f = lambda a, b: p.bind(a, b)  # noqa: E731
        np.testing.assert_array_equal(refjit.jit(f)(a, b), f(a, b), err_msg=str(p))


EVERYDAY = {  # jnp and scipy functions that print total-order comparisons
    "searchsorted": lambda x: jnp.searchsorted(jnp.sort(x[0]), x[1]).astype(jnp.float32) * x[2],
    "interp": lambda x: jnp.interp(x, jnp.linspace(-2, 2, 5), jnp.arange(5.0) ** 2),
    "expm": lambda x: jax.scipy.linalg.expm(x[:, :6] * 0.3),
}


@pytest.mark.parametrize("name", EVERYDAY)
def test_everyday_functions_and_their_gradients(name, rng):
    f = EVERYDAY[name]
    x = rng.standard_normal((6, 8)).astype(np.float32)
    check_jit_and_grad(lambda x: jnp.sum(jnp.sin(f(x))), x, rtol=1e-4, atol=1e-5)
