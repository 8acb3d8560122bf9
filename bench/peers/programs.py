"""The peer benchmark's programs, written in JAX (jax.numpy / lax).

Each program is a function of f32 arrays (or pytrees of them) returning an f32 scalar, so that
it has a forward row (`jax.jit(fn)`) and a gradient row
(`jax.jit(jax.value_and_grad(fn, argnums=wrt))`). `programs()` lists them at the benchmark's
sizes; `programs(small=True)` lists the same programs at sizes small enough to pass their
values to `refjit run` on the command line, for the correctness check.

The programs are written so that `jax.make_jaxpr` prints what the benchmark means to measure:
matmuls are single `dot_general`s with the transposed layout in their dimension numbers (no
separate `transpose`), loops are `scan`s, row updates are `dynamic_update_slice`s, and nothing
closes over a constant array (so the jaxprs have no constvars).
"""
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax


@dataclass(frozen=True)
class Program:
    """A benchmark program.

    name:   the row's name (also the jaxpr file's stem)
    fn:     the function; returns an f32 scalar
    shapes: one pytree of jax.ShapeDtypeStruct (all f32) per argument of fn
    wrt:    the argnums the gradient row differentiates (all leaves of those arguments)
    """

    name: str
    fn: Callable[..., Any]
    shapes: tuple
    wrt: tuple[int, ...]

    def make_args(self, seed):
        """Deterministic inputs: uniform in [-1, 1), drawn leaf by leaf in flattening order."""
        rng = np.random.default_rng(seed)
        return jax.tree_util.tree_map(
            lambda s: rng.uniform(-1.0, 1.0, s.shape).astype(np.float32), self.shapes)


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def log_softmax(x):
    """log_softmax over the last axis, written as jax.nn.log_softmax computes it."""
    shifted = x - lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True))
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))


def softmax(x):
    """softmax over the last axis, shifted by the (non-differentiated) row maximum."""
    e = jnp.exp(x - lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True)))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def matmul(a, b, transpose_a=False, transpose_b=False):
    """op(a) @ op(b) as one dot_general whose contracting dimensions encode the transposes."""
    dims = (((0 if transpose_a else 1,), (1 if transpose_b else 0,)), ((), ()))
    return lax.dot_general(a, b, dims)


# --- elementwise ------------------------------------------------------------------------------


def elementwise(n):
    def fn(x):
        return jnp.sum(jnp.sin(x) * jnp.cos(x) + x)

    return fn, (f32(n),), (0,)


def exp_tanh_chain(n):
    def fn(x):
        return jnp.sum(jnp.tanh(jnp.exp(-x * x) * 2.0 + jnp.log1p(x * x)))

    return fn, (f32(n),), (0,)


# --- linear algebra ---------------------------------------------------------------------------

LAYOUTS = {"nn": (False, False), "tn": (True, False), "nt": (False, True), "tt": (True, True)}


def matmul_layout(n, layout):
    """sum(op(a) @ op(b)) for square n x n operands; layout 'tn' means a.T @ b."""
    transpose_a, transpose_b = LAYOUTS[layout]

    def fn(a, b):
        return jnp.sum(matmul(a, b, transpose_a, transpose_b))

    return fn, (f32(n, n), f32(n, n)), (0, 1)


def batched_matmul(batch, n):
    def fn(a, b):
        return jnp.sum(lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))))

    return fn, (f32(batch, n, n), f32(batch, n, n)), (0, 1)


def matvec(n):
    def fn(a, x):
        return jnp.sum(matmul(a, x))

    return fn, (f32(n, n), f32(n)), (0, 1)


# --- networks ---------------------------------------------------------------------------------


def mlp(batch, n_in, n_hidden, n_out):
    """Two-layer relu MLP, softmax cross-entropy against one-hot f32 labels; grad wrt params."""

    def fn(params, x, labels):
        w1, b1, w2, b2 = params
        h = jnp.maximum(matmul(x, w1) + b1, 0.0)
        logits = matmul(h, w2) + b2
        return -jnp.mean(jnp.sum(labels * log_softmax(logits), axis=-1))

    params = (f32(n_in, n_hidden), f32(n_hidden), f32(n_hidden, n_out), f32(n_out))
    return fn, (params, f32(batch, n_in), f32(batch, n_out)), (0,)


def rnn(steps, hidden, batch):
    """h_t = tanh(h_{t-1} W + x_t U + b) over a scan; loss = sum of all hidden states."""

    def fn(params, h0, xs):
        w, u, b = params

        def step(h, x):
            h = jnp.tanh(matmul(h, w) + matmul(x, u) + b)
            return h, h

        _, hs = lax.scan(step, h0, xs)
        return jnp.sum(hs)

    params = (f32(hidden, hidden), f32(hidden, hidden), f32(hidden))
    return fn, (params, f32(batch, hidden), f32(steps, batch, hidden)), (0,)


def softmax_cross_entropy(batch, classes):
    def fn(logits, labels):
        return -jnp.mean(jnp.sum(labels * log_softmax(logits), axis=-1))

    return fn, (f32(batch, classes), f32(batch, classes)), (0,)


def layer_norm(rows, cols):
    def fn(x, gamma, beta):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return jnp.sum((x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta)

    return fn, (f32(rows, cols), f32(cols), f32(cols)), (0, 1, 2)


def attention(seq, dim):
    """Single-head attention softmax(q k^T / sqrt(d)) v; loss = sum of the output."""

    def fn(q, k, v):
        scores = matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(dim))
        return jnp.sum(matmul(softmax(scores), v))

    return fn, (f32(seq, dim), f32(seq, dim), f32(seq, dim)), (0, 1, 2)


# --- in-place updates -------------------------------------------------------------------------


def scan_row_updates(n):
    """The seed's pattern: a scan whose carry is a large array, each step writing one row from
    the previous one (carry[i] = sin(carry[i - 1]) * w) with dynamic_update_slice."""

    def fn(x, w):
        def body(i, carry):
            prev = lax.dynamic_slice_in_dim(carry, i - 1, 1, axis=0)
            return lax.dynamic_update_slice_in_dim(carry, jnp.sin(prev) * w, i, axis=0)

        return jnp.sum(lax.fori_loop(1, n, body, x))

    return fn, (f32(n, n), f32(n)), (0, 1)


def conv2d(batch, size, c_in, c_out, kernel):
    """A 'SAME' NHWC convolution with lax.conv_general_dilated."""

    def fn(x, k):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(jnp.tanh(y))

    return fn, (f32(batch, size, size, c_in), f32(kernel, kernel, c_in, c_out)), (0, 1)


# --- the list ---------------------------------------------------------------------------------


def programs(small=False):
    """The benchmark's programs in table order; small=True gives check-sized versions."""

    def pick(full, tiny):
        return tiny if small else full

    specs = [
        ("elementwise_4m", elementwise(pick(4 << 20, 64))),
        ("exp_tanh_chain_1m", exp_tanh_chain(pick(1 << 20, 64))),
    ]
    for n in (256, 512, 1024):
        for layout in LAYOUTS:
            specs.append((f"matmul_{layout}_{n}", matmul_layout(pick(n, 6 + n // 256), layout)))
    specs += [
        ("batched_matmul_16x256", batched_matmul(pick(16, 3), pick(256, 5))),
        ("matvec_2048", matvec(pick(2048, 7))),
        ("mlp_784_512_10_b256", mlp(pick(256, 4), pick(784, 9), pick(512, 8), pick(10, 5))),
        ("rnn_scan_200x128_b1", rnn(pick(200, 6), pick(128, 5), 1)),
        ("rnn_scan_200x128_b16", rnn(pick(200, 6), pick(128, 5), pick(16, 3))),
        ("softmax_xent_1024x1000", softmax_cross_entropy(pick(1024, 4), pick(1000, 7))),
        ("layer_norm_4096x1024", layer_norm(pick(4096, 5), pick(1024, 8))),
        ("attention_256x64", attention(pick(256, 6), pick(64, 4))),
        ("scan_row_updates_1000", scan_row_updates(pick(1000, 6))),
        ("conv2d_nhwc_32x32x16x32", conv2d(pick(8, 2), pick(32, 5), pick(16, 3), pick(32, 4), 3)),
    ]
    return [Program(name, fn, shapes, wrt) for name, (fn, shapes, wrt) in specs]
