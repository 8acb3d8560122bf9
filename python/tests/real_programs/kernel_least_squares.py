"""Kernel ridge regression in plain JAX with explicit matmul precision (`precision=` on
jnp.dot and inside jax.default_matmul_precision), the bandwidth fitted by gradient descent on
a held-out error; the solve goes through jnp.linalg.solve."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import Program


def gram(x1, x2, log_bandwidth):
    sq = (jnp.sum(x1 ** 2, 1)[:, None] + jnp.sum(x2 ** 2, 1)[None, :]
          - 2 * jnp.dot(x1, x2.T, precision=lax.Precision.HIGHEST))
    return jnp.exp(-sq / (2 * jnp.exp(2 * log_bandwidth)))


def make(value_and_grad):
    rng = np.random.default_rng(7)
    x_train = rng.normal(size=(20, 3)).astype(np.float32)
    y_train = np.tanh(x_train @ np.array([1.0, -2.0, 0.5], np.float32))
    x_val = rng.normal(size=(10, 3)).astype(np.float32)
    y_val = np.tanh(x_val @ np.array([1.0, -2.0, 0.5], np.float32))

    def validation_error(log_bandwidth, batch):
        x_train, y_train, x_val, y_val = batch
        k = gram(x_train, x_train, log_bandwidth) + 0.1 * jnp.eye(len(x_train))
        alpha = jnp.linalg.solve(k, y_train)
        with jax.default_matmul_precision("highest"):
            prediction = gram(x_val, x_train, log_bandwidth) @ alpha
        return jnp.mean((prediction - y_val) ** 2)

    def step(log_bandwidth, batch):
        loss, grad = value_and_grad(validation_error)(log_bandwidth, batch)
        return log_bandwidth - 0.5 * grad, loss

    batch = (x_train, y_train, x_val, y_val)
    return Program(step, jnp.float32(0.3), [batch] * 4, rtol=1e-4, atol=1e-6)
