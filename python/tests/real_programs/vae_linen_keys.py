"""A variational autoencoder in flax linen: typed PRNG keys (jax.random.key) split every step
and passed into the model for the reparameterisation, a Bernoulli likelihood and a KL term."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import Program


class VAE(nn.Module):
    latents: int = 4

    @nn.compact
    def __call__(self, x, key):
        h = nn.relu(nn.Dense(32, name="enc")(x))
        mean = nn.Dense(self.latents, name="mean")(h)
        logvar = nn.Dense(self.latents, name="logvar")(h)
        z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(key, mean.shape)
        h = nn.relu(nn.Dense(32, name="dec")(z))
        return nn.Dense(x.shape[-1], name="out")(h), mean, logvar


def make(value_and_grad):
    model = VAE()
    rng = np.random.default_rng(3)
    images = (rng.uniform(size=(3, 8, 20)) > 0.5).astype(np.float32)
    key = jax.random.key(0)
    init_key, key = jax.random.split(key)
    params = model.init(init_key, images[0], init_key)["params"]
    tx = optax.adam(1e-3)

    def loss_fn(params, x, key):
        logits, mean, logvar = model.apply({"params": params}, x, key)
        bce = optax.sigmoid_binary_cross_entropy(logits, x).sum(-1)
        kl = -0.5 * jnp.sum(1 + logvar - mean ** 2 - jnp.exp(logvar), axis=-1)
        return jnp.mean(bce + kl)

    def step(state, x):
        params, opt_state, key = state
        key, sample_key = jax.random.split(key)
        loss, grads = value_and_grad(loss_fn)(params, x, sample_key)
        updates, opt_state = tx.update(grads, opt_state)
        return (optax.apply_updates(params, updates), opt_state, key), loss

    return Program(step, (params, tx.init(params), key), list(images))
