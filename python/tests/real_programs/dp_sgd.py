"""Differentially private SGD in plain JAX: per-example gradients with vmap(grad), each
clipped to a norm bound, summed, Gaussian noise from a key split every step, then averaged."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import random

from . import Program

CLIP, NOISE, LEARNING_RATE = 1.0, 0.5, 0.1


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def example_loss(params, x, y):
    logits = predict(params, x[None])[0]
    return -jax.nn.log_softmax(logits)[y]


def make(value_and_grad):
    key = random.PRNGKey(8)  # an old-style raw key, u32[2]
    sizes = [6, 16, 3]
    params = []
    for din, dout in zip(sizes[:-1], sizes[1:]):
        key, wkey = random.split(key)
        params.append((random.normal(wkey, (din, dout)) / np.sqrt(din), jnp.zeros(dout)))
    rng = np.random.default_rng(8)
    xs = rng.normal(size=(3, 12, 6)).astype(np.float32)
    ys = rng.integers(0, 3, size=(3, 12)).astype(np.int32)

    def clipped_gradient(params, x, y):
        loss, grads = value_and_grad(example_loss)(params, x, y)
        norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(grads)))
        scale = jnp.minimum(1.0, CLIP / (norm + 1e-6))
        return loss, jax.tree_util.tree_map(lambda g: g * scale, grads)

    def step(state, batch):
        params, key = state
        x, y = batch
        losses, grads = jax.vmap(clipped_gradient, in_axes=(None, 0, 0))(params, x, y)
        key, noise_key = random.split(key)
        leaves, tree = jax.tree_util.tree_flatten(grads)
        noise_keys = random.split(noise_key, len(leaves))
        noisy = [(jnp.sum(g, 0) + NOISE * CLIP * random.normal(k, g.shape[1:])) / len(x)
                 for g, k in zip(leaves, noise_keys)]
        grads = jax.tree_util.tree_unflatten(tree, noisy)
        params = jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
        return (params, key), jnp.mean(losses)

    return Program(step, (params, key), list(zip(xs, ys)))
