"""A decoder-only transformer language model's train step in flax linen: token and position
embeddings, causal self-attention, pre-LayerNorm blocks, weight-tied output, adamw on a warmup
cosine schedule behind global-norm clipping (the schedule is an integer count in the optimiser
state)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import Program

VOCAB, LENGTH, WIDTH = 17, 8, 16


class Block(nn.Module):
    @nn.compact
    def __call__(self, x, mask):
        h = nn.LayerNorm()(x)
        # No biases in attention (as in many current LMs): a key bias has a gradient of exactly
        # zero in real numbers, so its computed gradient is rounding noise that adam's first
        # steps (about lr * sign(g)) turn into full-size, arbitrary updates in JAX and refjit.
        attention = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=WIDTH,
                                                    use_bias=False)
        x = x + attention(h, mask=mask)
        h = nn.LayerNorm()(x)
        h = nn.Dense(4 * WIDTH)(h)
        return x + nn.Dense(WIDTH)(nn.gelu(h))


class LanguageModel(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(VOCAB, WIDTH)
        positions = self.param("positions", nn.initializers.normal(0.02), (LENGTH, WIDTH))
        x = embed(tokens) + positions[: tokens.shape[-1]]
        mask = nn.make_causal_mask(tokens)
        for _ in range(2):
            x = Block()(x, mask)
        return embed.attend(nn.LayerNorm()(x))


def make(value_and_grad):
    model = LanguageModel()
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, size=(3, 4, LENGTH + 1)).astype(np.int32)
    params = model.init(jax.random.key(5), tokens[0, :, :-1])["params"]
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, warmup_steps=2, decay_steps=10)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.1))

    def loss_fn(params, batch):
        logits = model.apply({"params": params}, batch[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch[:, 1:]).mean()

    def step(state, batch):
        params, opt_state = state
        loss, grads = value_and_grad(loss_fn)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    return Program(step, (params, tx.init(params)), list(tokens), rtol=1e-4, atol=1e-5)
