"""Gaussian-process regression in plain JAX: an RBF kernel, the marginal likelihood through a
Cholesky factor and cho_solve, its hyperparameters (log scale) fitted with optax adam, and the
posterior mean at test points."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.scipy.linalg import cho_solve

from . import Program


def rbf(x1, x2, params):
    d2 = jnp.sum((x1[:, None, :] - x2[None, :, :]) ** 2, axis=-1)
    return jnp.exp(params["log_amp"]) * jnp.exp(-0.5 * d2 / jnp.exp(2 * params["log_len"]))


def make(value_and_grad):
    rng = np.random.default_rng(6)
    x = rng.uniform(-2, 2, size=(24, 1))
    y = np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=24)
    x_test = np.linspace(-2, 2, 7)[:, None]
    params = {"log_amp": 0.0, "log_len": -0.5, "log_noise": -2.0}
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float32), params)
    tx = optax.adam(5e-2)

    def negative_log_marginal(params, x, y):
        k = rbf(x, x, params) + (jnp.exp(params["log_noise"]) + 1e-5) * jnp.eye(len(x))
        chol = jnp.linalg.cholesky(k)
        alpha = cho_solve((chol, True), y)
        return (0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(chol)))
                + 0.5 * len(x) * jnp.log(2 * jnp.pi))

    def step(state, batch):
        params, opt_state = state
        x, y = batch
        loss, grads = value_and_grad(negative_log_marginal)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
        k = rbf(x, x, params) + (jnp.exp(params["log_noise"]) + 1e-5) * jnp.eye(len(x))
        mean = rbf(x_test.astype(jnp.float32), x, params) @ jnp.linalg.solve(k, y)
        return (params, opt_state), {"loss": loss, "posterior_mean": mean}

    batch = (x.astype(np.float32), y.astype(np.float32))
    return Program(step, (params, tx.init(params)), [batch] * 4, rtol=2e-4, atol=2e-5)
