"""Training programs written the way their communities write them (flax linen and NNX with
optax, and plain JAX), for test_real_programs.py. Each module defines

    make(value_and_grad) -> Program

where `value_and_grad` is jax.value_and_grad or refjit.value_and_grad, and the program's
`step(state, batch) -> (state, loss)` is what the user would put under `jax.jit`.
"""
import dataclasses
from typing import Any, Callable


@dataclasses.dataclass
class Program:
    step: Callable          # (state, batch) -> (state, metrics)
    state: Any              # the initial training state (params, optimiser state, keys, ...)
    batches: list           # one per training step
    rtol: float = 2e-5      # per-step agreement with JAX: every leaf of state and metrics
    atol: float = 2e-6
