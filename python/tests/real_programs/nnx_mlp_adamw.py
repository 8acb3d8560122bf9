"""A flax NNX model (Linear, LayerNorm, Dropout given an nnx.Rngs made from a typed key the
step splits) trained with optax adamw through NNX's functional API: nnx.split into a graph
and a state, nnx.merge inside the loss, as one writes a step for any jit."""
import jax
import numpy as np
import optax
from flax import nnx

from . import Program


class Classifier(nnx.Module):
    def __init__(self, din, dhidden, dout, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dhidden, rngs=rngs)
        self.norm = nnx.LayerNorm(dhidden, rngs=rngs)
        self.dropout = nnx.Dropout(0.2)
        self.linear2 = nnx.Linear(dhidden, dout, rngs=rngs)

    def __call__(self, x, key):
        x = nnx.gelu(self.norm(self.linear1(x)))
        return self.linear2(self.dropout(x, rngs=nnx.Rngs(dropout=key)))


def make(value_and_grad):
    model = Classifier(12, 32, 4, rngs=nnx.Rngs(params=0))
    graphdef, params = nnx.split(model, nnx.Param)
    tx = optax.adamw(3e-3, weight_decay=1e-2)
    rng = np.random.default_rng(2)
    xs = rng.normal(size=(4, 16, 12)).astype(np.float32)
    ys = rng.integers(0, 4, size=(4, 16)).astype(np.int32)

    def loss_fn(params, x, y, key):
        model = nnx.merge(graphdef, params)
        logits = model(x, key)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def step(state, batch):
        params, opt_state, key = state
        key, dropout_key = jax.random.split(key)
        loss, grads = value_and_grad(loss_fn)(params, *batch, dropout_key)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, key), loss

    state = (params, tx.init(params), jax.random.key(1))
    return Program(step, state, list(zip(xs, ys)))
