"""A small residual network in flax linen with BatchNorm (its batch statistics a mutable
collection updated by the step) and Dropout drawing from an rng collection, trained with
optax SGD with momentum on a piecewise-constant schedule."""
import flax.linen as nn
import jax
import numpy as np
import optax

from . import Program


class ResidualBlock(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x, train):
        y = nn.Conv(self.features, (3, 3), use_bias=False)(x)
        y = nn.BatchNorm(use_running_average=not train, momentum=0.9)(y)
        y = nn.relu(y)
        y = nn.Conv(self.features, (3, 3), use_bias=False)(y)
        y = nn.BatchNorm(use_running_average=not train, momentum=0.9)(y)
        return nn.relu(x + y)


class ResNet(nn.Module):
    @nn.compact
    def __call__(self, x, train=True):
        x = nn.Conv(8, (3, 3))(x)
        x = ResidualBlock(8)(x, train)
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = ResidualBlock(8)(x, train)
        x = x.mean(axis=(1, 2))
        x = nn.Dropout(0.1, deterministic=not train)(x)
        return nn.Dense(5)(x)


def make(value_and_grad):
    model = ResNet()
    rng = np.random.default_rng(10)
    images = rng.normal(size=(3, 6, 8, 8, 2)).astype(np.float32)
    labels = rng.integers(0, 5, size=(3, 6)).astype(np.int32)
    variables = model.init({"params": jax.random.key(10)}, images[0], train=False)
    schedule = optax.piecewise_constant_schedule(0.05, {2: 0.1})
    tx = optax.sgd(schedule, momentum=0.9)

    def loss_fn(params, batch_stats, images, labels, dropout_key):
        logits, updates = model.apply({"params": params, "batch_stats": batch_stats}, images,
                                      train=True, mutable=["batch_stats"],
                                      rngs={"dropout": dropout_key})
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        return loss, updates["batch_stats"]

    def step(state, batch):
        params, batch_stats, opt_state, key = state
        key, dropout_key = jax.random.split(key)
        (loss, batch_stats), grads = value_and_grad(loss_fn, has_aux=True)(
            params, batch_stats, *batch, dropout_key)
        updates, opt_state = tx.update(grads, opt_state)
        params = optax.apply_updates(params, updates)
        return (params, batch_stats, opt_state, key), loss

    state = (variables["params"], variables["batch_stats"], tx.init(variables["params"]),
             jax.random.key(11))
    return Program(step, state, list(zip(images, labels)), rtol=1e-4, atol=1e-5)
