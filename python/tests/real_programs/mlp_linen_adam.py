"""A flax linen MLP classifier on MNIST-shaped data, optax adam, accuracy from an argmax."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import Program


class MLP(nn.Module):
    hidden: int = 64

    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(self.hidden)(x))
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(10)(x)


def make(value_and_grad):
    model = MLP()
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(4, 16, 28, 28, 1)).astype(np.float32)
    labels = rng.integers(0, 10, size=(4, 16)).astype(np.int32)
    params = model.init(jax.random.PRNGKey(0), images[0])["params"]
    tx = optax.adam(1e-3)

    def loss_fn(params, batch):
        logits = model.apply({"params": params}, batch["image"])
        one_hot = jax.nn.one_hot(batch["label"], 10)
        loss = optax.softmax_cross_entropy(logits, one_hot).mean()
        return loss, logits

    def step(state, batch):
        params, opt_state = state
        (loss, logits), grads = value_and_grad(loss_fn, has_aux=True)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        accuracy = jnp.mean(jnp.argmax(logits, -1) == batch["label"])
        return (params, opt_state), {"loss": loss, "accuracy": accuracy}

    batches = [{"image": i, "label": l} for i, l in zip(images, labels)]
    return Program(step, (params, tx.init(params)), batches)
