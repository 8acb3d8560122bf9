"""A flax linen CNN with max and average pooling, SGD with Nesterov momentum and weight
decay chained in optax, integer labels through optax's integer-label cross-entropy."""
import flax.linen as nn
import jax
import numpy as np
import optax

from . import Program


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=8, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(features=16, kernel_size=(3, 3), padding="VALID")(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(features=32)(x)
        x = nn.relu(x)
        return nn.Dense(features=10)(x)


def make(value_and_grad):
    model = CNN()
    rng = np.random.default_rng(1)
    images = rng.normal(size=(3, 8, 16, 16, 1)).astype(np.float32)
    labels = rng.integers(0, 10, size=(3, 8)).astype(np.int32)
    params = model.init(jax.random.key(1), images[0])["params"]
    tx = optax.chain(optax.add_decayed_weights(1e-4),
                     optax.sgd(learning_rate=0.05, momentum=0.9, nesterov=True))

    def loss_fn(params, images, labels):
        logits = model.apply({"params": params}, images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    def step(state, batch):
        params, opt_state = state
        loss, grads = value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    return Program(step, (params, tx.init(params)), list(zip(images, labels)))
