"""The peer benchmark's programs, written in JAX (jax.numpy / lax).

Each program is a function of f32 arrays (or pytrees of them) returning an f32 scalar, so that
it has a forward row (`jax.jit(fn)`) and a gradient row
(`jax.jit(jax.value_and_grad(fn, argnums=wrt))`). `programs()` lists them at the benchmark's
sizes; `programs(small=True)` lists the same programs at sizes small enough to pass their
values to `refjit run` on the command line, for the correctness check.

The first rows are written so that `jax.make_jaxpr` prints what they mean to measure: matmuls
are single `dot_general`s with the transposed layout in their dimension numbers (no separate
`transpose`), loops are `scan`s, row updates are `dynamic_update_slice`s, and nothing closes
over a constant array (so the jaxprs have no constvars). The rows named `plain_*` are written
the way users write them (`x @ w.T`, `jnp.pad`, `jax.nn.softmax`, `lax.while_loop`,
`reduce_window` pooling, indexing a table), and refjit must be as fast on those. A program
with no `wrt` (a while loop, which JAX cannot differentiate in reverse mode) has a forward
row only.
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


# --- written the way users write them --------------------------------------------------------


def plain_newton_while(n):
    """sqrt(a) by 30 Newton steps in a lax.while_loop (forward only)."""

    def fn(a):
        a = 2.0 + a  # in [1, 3)

        def body(state):
            i, x = state
            return i + 1, x - (x * x - a) / (2 * x)

        _, x = lax.while_loop(lambda s: s[0] < 30, body, (0, a))
        return jnp.sum(x)

    return fn, (f32(n),), ()


def plain_heat_scan(n, steps):
    """The explicit 1-D heat equation: each step pads the rod and takes shifted slices."""

    def fn(u0):
        def step(u, _):
            p = jnp.pad(u, 1)
            return u + 0.1 * (p[2:] - 2 * u + p[:-2]), None

        u, _ = lax.scan(step, u0, None, length=steps)
        return jnp.sum(u ** 2)

    return fn, (f32(n),), (0,)


def plain_nbody_scan(bodies, steps):
    """Softened gravity between every pair of bodies, by broadcasting, in a scan over time."""

    def fn(x, v):
        def step(state, _):
            x, v = state
            d = x[:, None, :] - x[None, :, :]
            r2 = jnp.sum(d * d, axis=-1) + 0.1
            v = v - 0.01 * jnp.sum(d / r2[..., None] ** 1.5, axis=1)
            return (x + 0.01 * v, v), None

        (x, _), _ = lax.scan(step, (x, v), None, length=steps)
        return jnp.sum(x ** 2)

    return fn, (f32(bodies, 3), f32(bodies, 3)), (0, 1)


def plain_mlp(batch, n_in, n_hidden, n_out):
    """x @ w + b, relu, and optax's softmax cross-entropy against one-hot labels."""

    def fn(params, x, labels):
        w1, b1, w2, b2 = params
        h = jax.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))

    params = (f32(n_in, n_hidden), f32(n_hidden), f32(n_hidden, n_out), f32(n_out))
    return fn, (params, f32(batch, n_in), f32(batch, n_out)), (0,)


def plain_softmax_xent(batch, classes):
    def fn(logits, labels):
        return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))

    return fn, (f32(batch, classes), f32(batch, classes)), (0,)


def plain_attention(seq, dim):
    def fn(q, k, v):
        return jnp.sum(jax.nn.softmax(q @ k.T / jnp.sqrt(dim), axis=-1) @ v)

    return fn, (f32(seq, dim), f32(seq, dim), f32(seq, dim)), (0, 1, 2)


def plain_transformer_block(seq, dim, hidden):
    """Pre-norm self-attention and a gelu MLP, each with a residual; weights used as x @ w.T."""

    def layer_norm(x, g):
        mean = x.mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * g

    def fn(params, x):
        g1, wq, wk, wv, wo, g2, w1, w2 = params
        h = layer_norm(x, g1)
        q, k, v = h @ wq.T, h @ wk.T, h @ wv.T
        x = x + (jax.nn.softmax(q @ k.T / jnp.sqrt(dim), axis=-1) @ v) @ wo.T
        x = x + jax.nn.gelu(layer_norm(x, g2) @ w1.T) @ w2.T
        return jnp.sum(x ** 2)

    params = (f32(dim), f32(dim, dim), f32(dim, dim), f32(dim, dim), f32(dim, dim), f32(dim),
              f32(hidden, dim), f32(dim, hidden))
    return fn, (params, f32(seq, dim)), (0,)


def plain_lstm(steps, batch, n_in, hidden):
    """An LSTM over a sequence (lax.scan), gates from x @ wx + h @ wh + b."""

    def fn(params, xs):
        wx, wh, b = params

        def cell(state, x):
            h, c = state
            i, f, g, o = jnp.split(x @ wx + h @ wh + b, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((batch, hidden), xs.dtype)
        _, hs = lax.scan(cell, (zeros, zeros), xs)
        return jnp.sum(hs ** 2)

    params = (f32(n_in, 4 * hidden), f32(hidden, 4 * hidden), f32(4 * hidden))
    return fn, (params, f32(steps, batch, n_in)), (0,)


def plain_cnn_pool(batch, size, c_in, c_out):
    """conv (SAME, NHWC), relu, 2x2 max-pool with lax.reduce_window (flax's max_pool), dense."""

    def fn(params, x):
        k, w = params
        y = jax.nn.relu(lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC")))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.sum(jnp.tanh(y.reshape(batch, -1) @ w))

    half = size // 2
    params = (f32(3, 3, c_in, c_out), f32(half * half * c_out, 10))
    return fn, (params, f32(batch, size, size, c_in)), (0,)


def plain_embedding(vocab, dim, batch, context):
    """Rows of an embedding table picked by integer ids (table[ids]); the gradient is a
    scatter-add into the table. The ids are made from the f32 input, as arguments are f32."""

    def fn(table, u):
        ids = (jnp.abs(u) * (vocab - 1)).astype(jnp.int32)
        return jnp.sum(jnp.tanh(table[ids].mean(axis=1)))

    return fn, (f32(vocab, dim), f32(batch, context)), (0,)


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
        ("plain_newton_while_1m", plain_newton_while(pick(1 << 20, 8))),
        ("plain_heat_scan_100k_x500", plain_heat_scan(pick(100_000, 9), pick(500, 4))),
        ("plain_nbody_scan_256_x50", plain_nbody_scan(pick(256, 5), pick(50, 3))),
        ("plain_mlp_784_512_10_b256",
         plain_mlp(pick(256, 4), pick(784, 9), pick(512, 8), pick(10, 5))),
        ("plain_softmax_xent_2048x1000", plain_softmax_xent(pick(2048, 4), pick(1000, 7))),
        ("plain_attention_256x64", plain_attention(pick(256, 6), pick(64, 4))),
        ("plain_transformer_block_128x128",
         plain_transformer_block(pick(128, 5), pick(128, 4), pick(512, 8))),
        ("plain_lstm_100x16x64x128", plain_lstm(pick(100, 4), pick(16, 2), pick(64, 3),
                                                pick(128, 4))),
        ("plain_cnn_pool_16x28x8x16", plain_cnn_pool(pick(16, 2), pick(28, 6), pick(8, 2),
                                                     pick(16, 3))),
        ("plain_embedding_10k_x128_b256x8",
         plain_embedding(pick(10_000, 12), pick(128, 4), pick(256, 3), pick(8, 2))),
    ]
    return [Program(name, fn, shapes, wrt) for name, (fn, shapes, wrt) in specs]
