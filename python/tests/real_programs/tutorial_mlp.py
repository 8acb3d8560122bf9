"""The JAX tutorial's MLP from scratch: parameters from random.split, relu layers,
log-softmax via logsumexp, plain SGD with tree_map, accuracy on a one-hot target."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import random
from jax.scipy.special import logsumexp

from . import Program


def init_network_params(sizes, key):
    keys = random.split(key, len(sizes))
    return [(0.1 * random.normal(k1, (n, m)), 0.1 * random.normal(k2, (n,)))
            for m, n, k in zip(sizes[:-1], sizes[1:], keys)
            for k1, k2 in [random.split(k)]]


def predict(params, image):
    activations = image
    for w, b in params[:-1]:
        activations = jax.nn.relu(jnp.dot(w, activations) + b)
    final_w, final_b = params[-1]
    logits = jnp.dot(final_w, activations) + final_b
    return logits - logsumexp(logits)


batched_predict = jax.vmap(predict, in_axes=(None, 0))


def make(value_and_grad):
    params = init_network_params([64, 32, 32, 10], random.key(9))
    rng = np.random.default_rng(9)
    images = rng.uniform(size=(4, 16, 64)).astype(np.float32)
    targets = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=(4, 16))]

    def loss(params, images, targets):
        return -jnp.mean(batched_predict(params, images) * targets)

    def step(params, batch):
        value, grads = value_and_grad(loss)(params, *batch)
        params = [(w - 0.5 * dw, b - 0.5 * db) for (w, b), (dw, db) in zip(params, grads)]
        accuracy = jnp.mean(jnp.argmax(batch[1], axis=1) ==
                            jnp.argmax(batched_predict(params, batch[0]), axis=1))
        return params, (value, accuracy)

    return Program(step, params, list(zip(images, targets)))
