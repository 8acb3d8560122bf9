#!/usr/bin/env python3
"""Writes refjit's JAX differential-test corpus (test/jax_corpus/cases/).

Needs JAX (pip install jax jaxlib into a venv); the checked-in corpus does not, so
scripts/test.sh runs it without JAX (test/jax_corpus/run_corpus.py).

For each program below this writes, into cases/:
  NAME.jaxpr        jax.make_jaxpr(f) at the example arguments
  NAME.grad.jaxpr   jax.make_jaxpr(jax.grad(f, argnums=float args)) when f returns a float scalar
  NAME.jvp.jaxpr    jax.make_jaxpr of (primals, tangents) -> jax.jvp(f, primals, tangents)
and one line in cases/manifest.json with the argument values (refjit's CLI value syntax) and
JAX's results for each of the three programs. Regenerate with
  scripts/jax_corpus.sh generate
"""
import json
import os
import sys

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

jax.config.update("jax_enable_x64", False)

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")

PROGRAMS = []


def program(*args, grad=True, jvp=True, tol=1e-5, tags=(), refuses=None):
    """Registers f with its example arguments (numpy arrays or scalars). `refuses`: a phrase
    of the error refjit's own gradient of the printed program must stop with (where the text
    lacks what JAX differentiates with, such as a custom_vjp's rules)."""

    def register(f):
        PROGRAMS.append(dict(name=f.__name__, fn=f, args=args, grad=grad, jvp=jvp, tol=tol,
                             tags=tags, refuses=refuses))
        return f

    return register


rng = np.random.default_rng(1234)


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def i32(*shape, lo=0, hi=10):
    return rng.integers(lo, hi, size=shape).astype(np.int32)


# --- elementwise -----------------------------------------------------------------------------


@program(f32(8))
def sin_cos_chain(x):
    return jnp.sum(jnp.sin(x) * jnp.cos(x) + x)


@program(f32(6, lo=0.1, hi=2.0))
def exp_log_sqrt(x):
    return jnp.sum(jnp.exp(x) + jnp.log(x) + jnp.sqrt(x) + lax.rsqrt(x))


@program(f32(6))
def tanh_logistic(x):
    return jnp.sum(jnp.tanh(x) * jax.nn.sigmoid(x))


@program(f32(5), f32(5))
def max_min_where(x, y):
    return jnp.sum(jnp.where(x > y, jnp.maximum(x, y), jnp.minimum(x, y) * 2.0))


@program(f32(5))
def square_and_pow(x):
    return jnp.sum(jnp.square(x) + x ** 3 + jnp.abs(x) ** 1.5)


@program(f32(7, lo=-3, hi=3))
def clip_values(x):
    return jnp.sum(jnp.clip(x, -1.0, 1.0) * x)


@program(f32(6, lo=-3, hi=3), f32(6, lo=0.5, hi=2))
def rem_mod(x, y):
    return jnp.sum(lax.rem(x, y) + jnp.mod(x, y))


@program(f32(6, lo=-3, hi=3), jvp=False)
def rounding(x):
    return jnp.sum(jnp.floor(x) + jnp.ceil(x) + jnp.round(x) + jnp.sign(x)) + jnp.sum(x)


@program(f32(6, lo=-0.5, hi=0.5))
def log1p_expm1(x):
    return jnp.sum(jnp.log1p(x) * jnp.expm1(x))


@program(f32(6), f32(6))
def atan2_hyperbolic(x, y):
    return jnp.sum(jnp.arctan2(x, y) + jnp.sinh(x) + jnp.cosh(y) + jnp.arcsinh(x))


@program(f32(6, lo=-0.9, hi=0.9), tol=1e-4)
def inverse_trig(x):
    return jnp.sum(jnp.arcsin(x) + jnp.arccos(x) + jnp.arctan(x) + jnp.arctanh(x) + jnp.tan(x))


@program(f32(6, lo=-2, hi=2), tol=1e-4)
def erf_family(x):
    return jnp.sum(jax.scipy.special.erf(x) + jax.scipy.special.erfc(x))


@program(f32(6, lo=0.2, hi=6), tol=1e-4)
def gamma_functions(x):
    step = jnp.nextafter(jax.lax.stop_gradient(x), 10.0) - jax.lax.stop_gradient(x)
    return jnp.sum(jax.scipy.special.gammaln(x) * jax.scipy.special.digamma(x + 1.0)) + jnp.sum(
        step * 1e6)


@program(f32(6, lo=0.5, hi=4), tol=1e-4)
def cbrt_and_exp2(x):
    return jnp.sum(jnp.cbrt(x) + jnp.exp2(x) + jnp.log2(x) + jnp.log10(x))


@program(f32(6))
def isfinite_select(x):
    y = jnp.log(x)
    return jnp.sum(jnp.where(jnp.isfinite(y), y, 0.0))


# --- broadcasting and reductions -------------------------------------------------------------


@program(f32(3), f32(4))
def outer_product(x, y):
    return jnp.sum(jnp.sin(x[:, None] * y[None, :]))


@program(f32(4, 5))
def softmax_rows(x):
    return jnp.sum(jax.nn.softmax(x, axis=-1) * jnp.arange(5.0))


@program(f32(4, 6), f32(6), f32(6))
def layer_norm(x, g, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    y = (x - mu) / jnp.sqrt(var + 1e-5) * g + b
    return jnp.sum(y * y)


@program(f32(3, 4))
def logsumexp_rows(x):
    return jnp.sum(jax.nn.logsumexp(x, axis=1))


@program(f32(3, 4), grad=False)
def reductions(x):
    return (jnp.sum(x, axis=0), jnp.max(x, axis=1), jnp.min(x), jnp.prod(x, axis=1),
            jnp.argmax(x, axis=1), jnp.argmin(x, axis=0))


@program(f32(3, 4, lo=0.5, hi=1.5))
def prod_reduce(x):
    return jnp.sum(jnp.prod(x, axis=1))


@program(f32(6))
def cumulative(x):
    return jnp.sum(jnp.cumsum(x) * jnp.cumprod(x) + lax.cummax(x) - lax.cummin(x))


@program(f32(4, 3), f32(4, 3))
def cross_entropy(logits, labels):
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.softmax(labels), axis=-1))


# --- linear algebra --------------------------------------------------------------------------


@program(f32(4, 5), f32(5, 3))
def matmul(a, b):
    return jnp.sum(jnp.tanh(a @ b))


@program(f32(2, 3, 4), f32(2, 4, 5))
def batched_matmul(a, b):
    return jnp.sum(jnp.einsum("bij,bjk->bik", a, b) ** 2)


@program(f32(8, 6), f32(6, 4), f32(4), f32(4, 3))
def mlp(x, w1, b1, w2):
    h = jax.nn.relu(x @ w1 + b1)
    return jnp.mean((h @ w2) ** 2)


@program(f32(2, 5, 4), f32(4, 4), f32(4, 4), f32(4, 4))
def attention(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = jnp.einsum("bqd,bkd->bqk", q, k) / 2.0
    return jnp.sum(jax.nn.softmax(s, axis=-1) @ v)


# --- shapes ----------------------------------------------------------------------------------


@program(f32(3, 4), f32(2, 4))
def concat_split_flip(x, y):
    z = jnp.concatenate([x, y], axis=0)
    a, b = jnp.split(z, [2], axis=0)
    return jnp.sum(jnp.flip(a, axis=1) * a[:, ::-1]) + jnp.sum(b[1:, 1:3] ** 2)


@program(f32(3, 4))
def transpose_reshape_pad(x):
    y = jnp.pad(x.T.reshape(2, 6), ((1, 0), (0, 2)))
    return jnp.sum(y * jnp.arange(24.0).reshape(3, 8))


@program(f32(4), f32(4))
def stack_roll(x, y):
    s = jnp.stack([x, y])
    return jnp.sum(jnp.roll(s, 1, axis=1) * s)


@program(f32(10), grad=True)
def strided_slices(x):
    return jnp.sum(x[1:8:3] * x[::4][:3]) + x[-1]


# --- indexing: gather / scatter --------------------------------------------------------------


@program(f32(6, 3), np.array([4, 0, 5, 4], dtype=np.int32))
def take_rows(x, idx):
    return jnp.sum(jnp.sin(x[idx]))


@program(f32(8), np.array([1, 3, 3, 7], dtype=np.int32), f32(4))
def scatter_add_dup(x, idx, v):
    return jnp.sum(x.at[idx].add(v * v) ** 2)


@program(f32(8), np.array([1, 3, 6], dtype=np.int32), f32(3))
def scatter_set(x, idx, v):
    return jnp.sum(x.at[idx].set(v) * jnp.arange(8.0))


@program(f32(5, 4), np.int32(2))
def dynamic_row(x, i):
    return jnp.sum(x[i] * 3.0)


@program(f32(5, 4), np.array([[0, 1], [4, 3], [2, 2]], dtype=np.int32))
def gather_points(x, ij):
    return jnp.sum(x[ij[:, 0], ij[:, 1]] ** 2)


@program(f32(4, 5), np.array([[1], [0], [4], [2]], dtype=np.int32))
def take_along(x, idx):
    return jnp.sum(jnp.take_along_axis(x, idx, axis=1) ** 2)


@program(f32(8), np.array([0, 2, 2, 5], dtype=np.int32), f32(4, lo=0.5, hi=2.0), grad=False, jvp=False)
def scatter_mul_minmax(x, idx, v):
    return jnp.sum(x.at[idx].mul(v) + x.at[idx].max(v) + x.at[idx].min(v))


@program(f32(6), np.array([1, 9, -2], dtype=np.int32))
def take_out_of_bounds(x, idx):
    return jnp.sum(jnp.take(x, idx, mode="fill", fill_value=-1.0) * 2.0) + jnp.sum(
        jnp.take(x, idx, mode="clip"))


# --- control flow ----------------------------------------------------------------------------


@program(f32(5), f32(3))
def scan_cumulative(xs, c0):
    def step(c, x):
        c = jnp.tanh(c * x + 0.5)
        return c, jnp.sum(c)

    c, ys = lax.scan(step, c0, xs)
    return jnp.sum(c) + jnp.sum(ys)


@program(f32(6, 4), f32(4, 4), f32(4))
def rnn_scan(xs, w, h0):
    def step(h, x):
        h = jnp.tanh(w @ h + x)
        return h, h

    h, hs = lax.scan(step, h0, xs)
    return jnp.sum(hs ** 2)


@program(f32(4))
def fori_loop_sum(x):
    return jnp.sum(lax.fori_loop(0, 5, lambda i, c: c * 0.9 + jnp.sin(c) * i, x))


@program(f32(3), grad=False, jvp=True)
def while_loop_halving(x):
    def cond(c):
        return c[1] < 6

    def body(c):
        return c[0] * 0.5 + 1.0, c[1] + 1

    return lax.while_loop(cond, body, (x, 0))[0]


@program(np.float32(0.7), f32(3))
def cond_branches(p, x):
    return lax.cond(p > 0.5, lambda x: jnp.sum(jnp.sin(x)), lambda x: jnp.sum(x * x), x * p)


@program(np.int32(2), f32(4))
def switch_branches(i, x):
    return lax.switch(i, [lambda x: jnp.sum(x), lambda x: jnp.sum(x * x), lambda x: jnp.sum(jnp.cos(x))], x)


@program(f32(3), np.int32(4), grad=False)
def fori_loop_dynamic_bound(x, n):
    return jnp.sum(lax.fori_loop(0, n, lambda i, c: jnp.sin(c) + c * 0.5, x))


@program(f32(3), grad=False)
def while_loop_with_ref(x):
    acc = jax.new_ref(jnp.zeros(3, jnp.float32))

    def body(i):
        acc[...] += x * i.astype(jnp.float32)
        return i + 1

    lax.while_loop(lambda i: i < 4, body, 0)
    return jnp.sum(jax.freeze(acc) ** 2)


# --- custom rules and jax.nn --------------------------------------------------------------


@jax.custom_vjp
def _clip_gradient(x):
    return jnp.tanh(x)


def _clip_gradient_fwd(x):
    return jnp.tanh(x), x


def _clip_gradient_bwd(x, g):
    return (g * (1.0 - jnp.tanh(x) ** 2),)


_clip_gradient.defvjp(_clip_gradient_fwd, _clip_gradient_bwd)


# JAX has no forward mode for custom_vjp functions. The printout names the rules without their
# bodies: refjit runs it and JAX's printed gradient, but refuses to differentiate it itself.
@program(f32(5), jvp=False, refuses="cannot differentiate the custom_vjp function")
def custom_vjp_tanh(x):
    return jnp.sum(_clip_gradient(x) * x)


@program(f32(3, 4), f32(4, 4))
def checkpointed_layers(x, w):
    # jax.checkpoint prints as remat2 (with a policy), checkpoint_name as name[name=...].
    def layer(h):
        h = checkpoint_name(jnp.tanh(h @ w), "act")
        return jnp.sin(h) * h

    policy = jax.checkpoint_policies.save_only_these_names("act")
    h = jax.checkpoint(layer, policy=policy)(x)
    h = jax.checkpoint(layer)(h)
    return jnp.sum(h ** 2)


@program(f32(6, lo=-3, hi=3), tol=1e-4)
def nn_activations(x):
    return jnp.sum(jax.nn.gelu(x) + jax.nn.silu(x) + jax.nn.softplus(x) + jax.nn.elu(x) +
                   jax.nn.leaky_relu(x) + jax.nn.log_sigmoid(x))


@program(f32(4, 6), np.array([1, 0, 5, 3], dtype=np.int32))
def one_hot_nll(logits, labels):
    onehot = jax.nn.one_hot(labels, 6)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * onehot, axis=-1))


# --- refs ------------------------------------------------------------------------------------


@program(f32(4))
def ref_plumbing(x):
    r = jax.new_ref(x)
    r[...] = r[...] * 2.0 + jnp.sin(r[...])
    r[1] = r[2] * 3.0
    return jnp.sum(jax.freeze(r))


@program(f32(6), f32(3))
def ref_scan_accumulate(xs, w):
    acc = jax.new_ref(jnp.zeros(3, jnp.float32))

    def step(c, x):
        acc[...] += w * x
        return c + x, None

    c, _ = lax.scan(step, 0.0, xs)
    return jnp.sum(acc[...] ** 2) + c


@jax.jit
def _through_empty_ref(x):
    r = jax.empty_ref(jax.ShapeDtypeStruct(x.shape, x.dtype))
    r[...] = jnp.sin(x) * 2.0
    y = r[...] + 1.0
    jax.free_ref(r)
    return y


@program(f32(3), grad=False)  # JAX cannot differentiate through empty_ref yet
def empty_ref_scratch(x):
    return jnp.sum(_through_empty_ref(x) * x)


# --- sorting ---------------------------------------------------------------------------------


@program(f32(7))
def sort_values(x):
    return jnp.sum(jnp.sort(x) * jnp.arange(7.0))


@program(f32(7), grad=False)
def argsort_topk(x):
    v, i = lax.top_k(x, 3)
    return jnp.argsort(x), v, i


# --- random numbers (threefry) ---------------------------------------------------------

_KEY = np.asarray(jax.random.key_data(jax.random.PRNGKey(42)))


@program(_KEY, f32(2, 3), tol=1e-5)
def random_normal_noise(key, x):
    k1, k2 = jax.random.split(jax.random.wrap_key_data(key))
    noise = jax.random.normal(k1, x.shape) * 0.1 + jax.random.uniform(k2, x.shape)
    return jnp.sum((x + noise) ** 2)


@program(np.int32(7), grad=False)
def random_from_seed(seed):
    key = jax.random.fold_in(jax.random.key(seed), 3)
    a, b = jax.random.split(key)
    return (jax.random.randint(a, (5,), 0, 10), jax.random.bits(b, (3,), dtype=jnp.uint8),
            jax.random.bernoulli(a, 0.3, (4,)), jax.random.permutation(b, 6))


@program(_KEY, f32(8), tol=1e-5)
def random_dropout(key, x):
    keep = jax.random.bernoulli(jax.random.wrap_key_data(key), 0.7, x.shape)
    return jnp.sum(jnp.where(keep, x / 0.7, 0.0) ** 2)


# --- the seed: grad of a scan updating its carry with dynamic_update_slice -------------------

SEED_ROWS, SEED_COLS, SEED_STEPS = 4, 5, 6


def _seed_insert(state, row, col, value):
    update = jnp.concatenate([jnp.array([[value]]),
                              lax.dynamic_slice(state, (row, col), (1, SEED_COLS))], axis=-1)
    return lax.dynamic_update_slice(state, update, (row, col))


def _seed_delete(state, row, col):
    update = lax.dynamic_slice(state, (row, col + 1), (1, SEED_COLS))
    return lax.dynamic_update_slice(state, update, (row, col))


@program(np.float32(1.3), f32(SEED_ROWS, SEED_COLS * 2, lo=0, hi=1), f32(SEED_ROWS, SEED_COLS),
         i32(SEED_STEPS, 2, hi=SEED_ROWS), i32(SEED_STEPS, 2, hi=SEED_COLS),
         f32(SEED_STEPS, lo=0.5, hi=1.5), tol=1e-4)
def seed_slice1_loss(w, init_state, target, rows, cols, values):
    def step(state, inputs):
        (ir, dr), (ic, dc), v = inputs
        state = _seed_insert(state, ir, ic, v)
        return _seed_delete(state, dr, dc), None

    state, _ = lax.scan(step, init_state, ((rows[:, 0], rows[:, 1]), (cols[:, 0], cols[:, 1]), values ** w))
    return ((target - state[:SEED_ROWS, :SEED_COLS]) ** 2).mean()


@program(np.float32(1.3), f32(SEED_ROWS, SEED_COLS * 2, lo=0, hi=1), f32(SEED_ROWS, SEED_COLS),
         i32(SEED_STEPS, hi=SEED_ROWS), i32(SEED_STEPS, hi=SEED_COLS), f32(SEED_STEPS, lo=0.5, hi=1.5),
         tol=1e-4)
def seed_scatter_loss(w, init_state, target, rows, cols, values):
    def step(state, inputs):
        r, c, v = inputs
        indices = c + np.arange(SEED_COLS + 1, dtype=np.int32)
        vals = jnp.r_[v, lax.dynamic_slice(state, (r, c), (1, SEED_COLS)).ravel()]
        return state.at[r, indices].set(vals, indices_are_sorted=True, unique_indices=True), None

    state, _ = lax.scan(step, init_state, (rows, cols, values ** w))
    return ((target - state[:SEED_ROWS, :SEED_COLS]) ** 2).mean()


# --- convolutions ---------------------------------------------------------------------------
# JAX prints their gradients as convolutions too: negative padding, lhs dilation, and
# batch_group_count for the kernel gradient of a grouped convolution.


@program(f32(2, 6, 6, 3), f32(3, 3, 3, 4), tol=1e-4)
def conv2d_nhwc_same(x, k):
    y = lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.sum(jnp.tanh(y))


@program(f32(2, 3, 7, 6), f32(4, 3, 2, 2), tol=1e-4)
def conv2d_strided_dilated(x, k):
    y = lax.conv_general_dilated(x, k, (2, 1), ((1, 0), (2, 1)), lhs_dilation=(1, 2),
                                 rhs_dilation=(2, 1))
    return jnp.sum(jnp.sin(y))


@program(f32(2, 4, 9), f32(6, 2, 3), tol=1e-4)
def conv1d_grouped(x, k):
    y = lax.conv_general_dilated(x, k, (2,), "VALID", feature_group_count=2)
    return jnp.sum(y * y)


@program(f32(4, 3, 5, 5), f32(6, 3, 3, 3), tol=1e-4)
def conv2d_batch_grouped(x, k):
    y = lax.conv_general_dilated(x, k, (1, 1), ((1, 1), (0, 0)), batch_group_count=2)
    return jnp.sum(jnp.cos(y))


@program(f32(1, 2, 4, 4, 3), f32(2, 2, 2, 3, 2), tol=1e-4)
def conv3d_ndhwc(x, k):
    y = lax.conv_general_dilated(x, k, (1, 2, 1), "SAME",
                                 dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    return jnp.sum(y ** 2)


@program(np.array([0.3, 0.7, -0.2, 0.25, 1.1, -0.6], np.float32),
         np.array([[-1.5, 0.4, -1.5, 0.9], [0.8, 0.25, 1.4, -0.3]], np.float32), tol=1e-4)
def scatter_min_max(x, u):
    # Index 1 is hit twice; the two updates landing there in the min tie (-1.5), and in the
    # max an update ties the operand (0.25 at index 3): each tie splits the tangent in half.
    idx = jnp.array([1, 3, 1, 5])
    lo = x.at[idx].min(u[0])
    hi = x.at[idx].max(u[1])
    return jnp.sum(lo * jnp.arange(6.0)) + jnp.sum(jnp.sin(hi) * jnp.arange(1.0, 7.0))


@program(f32(6, lo=-2, hi=2), f32(3, lo=-2, hi=2), tol=1e-4)
def scatter_multiply_unique(x, u):
    y = x.at[jnp.array([0, 2, 5])].multiply(u, unique_indices=True)
    return jnp.sum(jnp.sin(y) * jnp.arange(1.0, 7.0))


@program(_KEY, f32(4, 3), tol=1e-5)
def random_batched_keys(key, x):
    # vmap over split keys: random_bits, random_split and random_fold_in on key<fry>[4].
    keys = jax.random.split(jax.random.wrap_key_data(key), 4)
    noise = jax.vmap(lambda k: jax.random.normal(k, (3,)))(keys)
    folded = jax.vmap(jax.random.fold_in)(keys, jnp.arange(4))
    pairs = jax.vmap(lambda k: jax.random.split(k, 2))(folded)
    bits = jax.vmap(lambda k: jax.random.bits(k[1], (2,)))(pairs)
    seeds = jax.random.key_data(jax.vmap(jax.random.key)(jnp.arange(3)))
    return jnp.sum((x + noise) ** 2), bits, seeds


@program(_KEY, f32(4, 3), tol=1e-5)
def random_batched_dropout(key, x):
    # One key per row, drawn inside vmap: the gradient runs through the batched bernoulli.
    keys = jax.random.split(jax.random.wrap_key_data(key), 4)
    keep = jax.vmap(lambda k: jax.random.bernoulli(k, 0.6, (3,)))(keys)
    return jnp.sum(jnp.where(keep, jnp.sin(x) / 0.6, 0.0) ** 2)


# --- 16-bit floats: float16 and bfloat16, each operation rounded to the format -----------------


def f16(*shape, lo=-1.0, hi=1.0):
    return f32(*shape, lo=lo, hi=hi).astype(np.float16)


def bf16(*shape, lo=-1.0, hi=1.0):
    return f32(*shape, lo=lo, hi=hi).astype(jnp.bfloat16)


@program(f16(4, 3), f16(3, 2), tol=2e-2)
def half_mlp(x, w):
    # Mixed precision as users write it: float16 weights and activations, a float32 loss.
    h = jnp.tanh(x @ w) + jax.nn.sigmoid(x[:, :2])
    return jnp.mean(h.astype(jnp.float32) ** 2)


@program(bf16(3, 4), f32(4), tol=3e-2)
def bfloat16_softmax(x, b):
    logits = x + b.astype(jnp.bfloat16)
    p = jax.nn.softmax(logits, axis=-1)
    return jnp.sum(p.astype(jnp.float32) * jnp.arange(4.0)) + jnp.max(logits).astype(jnp.float32)


@program(f32(6), grad=False, tol=1e-2)
def half_conversions(x):
    h = x.astype(jnp.float16)
    b = x.astype(jnp.bfloat16)
    bits = lax.bitcast_convert_type(h, jnp.uint16)
    back = lax.bitcast_convert_type(bits + 1, jnp.float16)
    return (h * 1000, b.astype(jnp.float16), bits, back, (h > 0.1), jnp.sort(-b),
            jnp.cumsum(h), (x * 3e4).astype(jnp.float16), jnp.arange(3).astype(jnp.bfloat16))


# --- windowed gathers and scatters (vmap of dynamic_slice / dynamic_update_slice) ----------


@program(f32(3, 7), np.array([1, 5, -2], dtype=np.int32), tol=1e-5)
def vmap_dynamic_slice(x, i):
    # Per-row windows of 3 (the last two starts are clamped), written back shifted by one.
    w = jax.vmap(lambda r, j: lax.dynamic_slice(r, (j,), (3,)))(x, i)
    y = jax.vmap(lambda r, v, j: lax.dynamic_update_slice(r, v, (j + 1,)))(x, jnp.sin(w), i)
    return jnp.sum(w * w) + jnp.sum(y * x)


@program(f32(2, 5, 6), np.array([[1, 2], [4, 0]], dtype=np.int32), tol=1e-5)
def vmap_dynamic_slice_2d(x, ij):
    w = jax.vmap(lambda m, s: lax.dynamic_slice(m, (s[0], s[1]), (2, 3)))(x, ij)
    return jnp.sum(jnp.tanh(w) * jnp.arange(6.0).reshape(2, 3))


_WINDOW_DNUMS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(),
                                           start_index_map=(0,))
_WINDOW_SCATTER_DNUMS = lax.ScatterDimensionNumbers(update_window_dims=(1,),
                                                    inserted_window_dims=(),
                                                    scatter_dims_to_operand_dims=(0,))


@program(f32(8), np.array([[0], [5], [6], [-1]], dtype=np.int32), f32(4, 3), tol=1e-5)
def windowed_gather_scatter_fill(x, idx, u):
    # Windows of 3 starting at 0, 5 (fits), 6 and -1 (do not fit: filled / dropped whole).
    g = lax.gather(x, idx, _WINDOW_DNUMS, slice_sizes=(3,),
                   mode=lax.GatherScatterMode.FILL_OR_DROP, fill_value=-1.0)
    s = lax.scatter_add(x, idx, u * g, _WINDOW_SCATTER_DNUMS,
                        mode=lax.GatherScatterMode.FILL_OR_DROP)
    c = lax.scatter_add(x, idx, u, _WINDOW_SCATTER_DNUMS, mode=lax.GatherScatterMode.CLIP)
    return jnp.sum(g * g) + jnp.sum(s * s) + jnp.sum(c * x)


@program(f32(5, lo=0.2, hi=12.0), f32(5, lo=0.05, hi=15.0), tol=1e-4)
def incomplete_gamma(a, x):
    # Both regimes (series, continued fraction); the gradient in a is igamma_grad_a.
    from jax.scipy.special import gammainc, gammaincc
    from jax.scipy.stats import gamma
    return (jnp.sum(gammainc(a, x) * jnp.arange(1.0, 6.0)) + jnp.sum(gammaincc(a, x * 0.5))
            + jnp.sum(gamma.cdf(x, a)))


@program(_KEY, f32(5, lo=0.2, hi=4.0), tol=1e-4)
def random_gamma_samples(key, a):
    # Marsaglia-Tsang rejection sampling (nested while loops on threefry draws); the gradient
    # in a is the implicit one (JAX's random_gamma_grad).
    g = jax.random.gamma(jax.random.wrap_key_data(key), a)
    return jnp.sum(g * jnp.arange(1.0, 6.0))


@program(_KEY, f32(3, lo=0.5, hi=3.0), grad=False, tol=1e-4)
def random_beta_dirichlet_loggamma(key, a):
    k1, k2 = jax.random.split(jax.random.wrap_key_data(key))
    return (jax.random.beta(k1, a, a + 1), jax.random.dirichlet(k2, a),
            jax.random.loggamma(k1, a * 0.1))


# --- writing ---------------------------------------------------------------------------------


def value_text(v):
    """An argument or result in refjit's CLI value syntax."""
    a = np.asarray(v)

    def scalar(x):
        if a.dtype == np.bool_:
            return "true" if x else "false"
        if np.issubdtype(a.dtype, np.integer):
            return str(int(x))
        x = float(x)
        if np.isnan(x):
            return "nan"
        if np.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(float(np.float32(x))) if a.dtype == np.float32 else repr(x)

    def rec(x):
        if x.ndim == 0:
            return scalar(x[()])
        return "[" + ", ".join(rec(x[i]) for i in range(x.shape[0])) + "]"

    return rec(a)


def flat_results(out):
    # Integer outputs have float0 tangents (no data), which refjit reads as bool zeros.
    return [value_text(np.zeros(np.shape(leaf), np.bool_)
                       if np.asarray(leaf).dtype == jax.dtypes.float0 else leaf)
            for leaf in jax.tree_util.tree_leaves(out)]


def float_argnums(args):
    # jnp.issubdtype knows bfloat16 (an ml_dtypes type numpy does not call floating).
    return tuple(i for i, a in enumerate(args) if jnp.issubdtype(np.asarray(a).dtype, jnp.floating))


def is_float_scalar(out):
    leaves = jax.tree_util.tree_leaves(out)
    return len(leaves) == 1 and np.shape(leaves[0]) == () and jnp.issubdtype(
        np.asarray(leaves[0]).dtype, jnp.floating)


def write(path, text):
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


def write_jaxpr(cases_dir, filename, closed):
    """Writes a ClosedJaxpr's text; returns its constants' values, which the text names as
    constvars without printing them (refjit run takes them first, one per constvar)."""
    write(os.path.join(cases_dir, filename), str(closed))
    return [value_text(c) for c in closed.consts]


def write_case(cases_dir, name, f, args, grad=True, jvp=True, tol=1e-5, refuses=None):
    """Writes NAME.jaxpr (and .grad/.jvp) into cases_dir; returns its manifest entry."""
    args = [np.asarray(a) for a in args]
    entry = dict(name=name, tol=tol, args=[value_text(a) for a in args])
    if refuses:
        entry["refjit_grad_refuses"] = refuses
    entry["consts"] = write_jaxpr(cases_dir, name + ".jaxpr", jax.make_jaxpr(f)(*args))
    out = jax.jit(f)(*args)
    entry["outputs"] = flat_results(out)
    wrt = float_argnums(args)
    if grad and is_float_scalar(out) and wrt:
        g = jax.grad(f, argnums=wrt)
        entry["grad_consts"] = write_jaxpr(cases_dir, name + ".grad.jaxpr", jax.make_jaxpr(g)(*args))
        entry["grad_wrt"] = list(wrt)
        entry["grad"] = flat_results(jax.jit(g)(*args))
    if jvp and wrt:
        targs = [np.asarray(f32(*np.shape(args[i]))).astype(args[i].dtype) for i in wrt]

        def jvp_of(*primals_and_tangents):
            primals = primals_and_tangents[:len(args)]
            ts = list(primals_and_tangents[len(args):])
            full = [ts.pop(0) if i in wrt else np.zeros(np.shape(a), jax.dtypes.float0)
                    for i, a in enumerate(args)]
            return jax.jvp(f, tuple(primals), tuple(full))

        entry["jvp_consts"] = write_jaxpr(cases_dir, name + ".jvp.jaxpr",
                                          jax.make_jaxpr(jvp_of)(*args, *targs))
        entry["jvp_args"] = [value_text(t) for t in targs]
        entry["jvp"] = flat_results(jax.jit(jvp_of)(*args, *targs))
    return entry


def write_manifest(cases_dir, manifest):
    with open(os.path.join(cases_dir, "manifest.json"), "w") as fh:
        fh.write("[\n" + ",\n".join(json.dumps(e) for e in manifest) + "\n]\n")


def main():
    os.makedirs(CASES, exist_ok=True)
    manifest = []
    only = set(sys.argv[1:])
    for p in PROGRAMS:
        if only and p["name"] not in only:
            continue
        manifest.append(write_case(CASES, p["name"], p["fn"], p["args"], p["grad"], p["jvp"],
                                   p["tol"], p["refuses"]))
        print(f"wrote {p['name']}", file=sys.stderr)
    path = os.path.join(CASES, "manifest.json")
    if only and os.path.exists(path):
        # Regenerating some programs: keep the other programs' entries, in definition order.
        old = {e["name"]: e for e in json.load(open(path))}
        old.update({e["name"]: e for e in manifest})
        order = [p["name"] for p in PROGRAMS]
        manifest = [old[n] for n in order if n in old]
    write_manifest(CASES, manifest)


if __name__ == "__main__":
    main()
