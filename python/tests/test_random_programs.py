"""Random JAX programs through refjit against JAX (random_programs.py), a small fixed set: the
first COUNT programs from seed 1 of at most MAX_LENGTH statements (a few seconds each), each a
test. A value, dtype or shape that differs from JAX's, NaN where JAX is finite, an internal
error, or an exception that is not a refjit.Error fails the test with a reproducer; refjit's
own refusals (refjit.Error) pass and are listed as warnings. scripts/jax_random.sh runs many
more, of any length (docs/testing.md, "Random programs against JAX")."""

import itertools
import warnings

import pytest

import random_programs

COUNT = 30
MAX_LENGTH = 25


class RefjitRefusal(UserWarning):
    """refjit refused a program JAX runs (a refjit.Error): allowed, and listed."""


def small_seeds():
    seeds = (s for s in itertools.count(1)
             if random_programs.generate(s).length <= MAX_LENGTH)
    return list(itertools.islice(seeds, COUNT))


@pytest.mark.parametrize("seed", small_seeds())
def test_random_program_agrees_with_jax(seed):
    result = random_programs.run_program(seed, "native")
    for o in result["outcomes"]:
        if o["status"] == "refusal":
            warnings.warn(f"program {seed}, {o['check']}: {o['message']}", RefjitRefusal)
    if random_programs.has_mismatch(result):
        pytest.fail(random_programs.mismatch_report(result), pytrace=False)
