"""Multinomial logistic regression with label smoothing and an L2 penalty, bool features
multiplied into the weights, optax.chain(clip_by_global_norm, adamw on an exponential
decay), and optax's integer-count bias correction."""
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import Program


def make(value_and_grad):
    rng = np.random.default_rng(12)
    features = rng.uniform(size=(4, 32, 10)) > 0.6  # bool
    labels = rng.integers(0, 4, size=(4, 32)).astype(np.int32)
    # Not zeros: at zero weights some gradients cancel to rounding noise, and adam's first
    # step (about lr * sign(g)) turns that noise into a full-size update.
    params = {"w": jnp.asarray(0.1 * rng.normal(size=(10, 4)), jnp.float32),
              "b": jnp.zeros(4)}
    schedule = optax.exponential_decay(0.1, transition_steps=1, decay_rate=0.9)
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adamw(schedule, weight_decay=1e-3))

    def loss_fn(params, x, y):
        logits = jnp.dot(x, params["w"]) + params["b"]
        targets = optax.smooth_labels(jax.nn.one_hot(y, 4), 0.1)
        l2 = sum(jnp.sum(p ** 2) for p in jax.tree_util.tree_leaves(params))
        return optax.softmax_cross_entropy(logits, targets).mean() + 1e-3 * l2

    def step(state, batch):
        params, opt_state = state
        loss, grads = value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    return Program(step, (params, tx.init(params)), list(zip(features, labels)))
