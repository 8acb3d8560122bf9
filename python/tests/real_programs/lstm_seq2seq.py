"""An LSTM encoder-decoder in flax linen (nn.RNN over nn.OptimizedLSTMCell), teacher forcing,
a masked per-token cross-entropy, optax adam with global-norm clipping."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import Program

VOCAB = 11


class Seq2seq(nn.Module):
    hidden: int = 16

    @nn.compact
    def __call__(self, source, target_in):
        embed = nn.Embed(VOCAB, 8)
        carry, _ = nn.RNN(nn.OptimizedLSTMCell(self.hidden), return_carry=True)(embed(source))
        outputs = nn.RNN(nn.OptimizedLSTMCell(self.hidden))(embed(target_in),
                                                           initial_carry=carry)
        return nn.Dense(VOCAB)(outputs)


def make(value_and_grad):
    model = Seq2seq()
    rng = np.random.default_rng(4)
    source = rng.integers(1, VOCAB, size=(3, 4, 6)).astype(np.int32)
    target = rng.integers(1, VOCAB, size=(3, 4, 5)).astype(np.int32)
    target[:, :, -1] = 0  # padding
    params = model.init(jax.random.key(4), source[0], target[0])["params"]
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-3))

    def loss_fn(params, source, target):
        target_in = jnp.pad(target[:, :-1], ((0, 0), (1, 0)))  # a start token 0 first
        logits = model.apply({"params": params}, source, target_in)
        mask = target > 0
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, target)
        return jnp.sum(losses * mask) / jnp.sum(mask)

    def step(state, batch):
        params, opt_state = state
        loss, grads = value_and_grad(loss_fn)(params, *batch)
        updates, opt_state = tx.update(grads, opt_state)
        return (optax.apply_updates(params, updates), opt_state), loss

    return Program(step, (params, tx.init(params)), list(zip(source, target)), rtol=1e-4,
                   atol=1e-5)
