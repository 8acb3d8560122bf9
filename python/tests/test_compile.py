"""refjit.compile: a JAX function (or its gradient) to an object file and a C header that a
C program links with nothing but libm."""

import shutil
import subprocess

import jax.numpy as jnp
import numpy as np
import pytest

import refjit

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-19")


def loss(w, x):
    return jnp.sum(jnp.tanh(x * w) ** 2)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_the_gradient_object_links_into_a_c_program_and_agrees(tmp_path):
    x = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    symbols = refjit.compile(loss, np.float32(0.7), x, path=str(tmp_path / "loss.o"),
                             mode="grad")
    assert symbols == ["loss"]
    header = (tmp_path / "loss.h").read_text()
    assert "int loss(float a, const float* b, float* out, float* grad_a);" in header
    (tmp_path / "main.c").write_text("""
#include <stdio.h>
#include "loss.h"
int main(void) {
  const float x[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  float out, grad;
  if (loss(0.7f, x, &out, &grad) != REFJIT_AOT_OK) return 1;
  printf("%.9g %.9g\\n", out, grad);
  return 0;
}
""")
    exe = tmp_path / "main"
    subprocess.run([CC, "-std=c99", "-O2", str(tmp_path / "main.c"), str(tmp_path / "loss.o"),
                    "-lm", "-o", str(exe)], check=True, cwd=tmp_path)
    out, grad = map(float, subprocess.run([str(exe)], check=True, capture_output=True,
                                          text=True).stdout.split())
    value, g = refjit.value_and_grad(loss)(np.float32(0.7), x)
    np.testing.assert_allclose([out, grad], [value, g], rtol=1e-6)


def test_vjp_mode_writes_forward_and_backward_entry_points(tmp_path):
    symbols = refjit.compile(loss, np.float32(0.7), np.ones(4, np.float32),
                             path=str(tmp_path / "l.o"), header=str(tmp_path / "l.h"),
                             mode="vjp", name="step")
    assert symbols == ["step_fwd", "step_bwd"]
    assert "step_residuals" in (tmp_path / "l.h").read_text()


def test_bad_mode_and_name():
    with pytest.raises(ValueError, match="mode"):
        refjit.compile(loss, 1.0, np.ones(2, np.float32), path="x.o", mode="reverse")
    with pytest.raises(refjit.Error, match="C function"):
        refjit.compile(loss, 1.0, np.ones(2, np.float32), path="x.o", name="not valid")


def test_a_second_process_links_the_cached_machine_code(tmp_path):
    # The same program compiled in two processes: the second runs no LLVM (docs/backend.md,
    # "Compilation cache") and computes the same numbers.
    import json
    import os
    import subprocess
    import sys
    script = (
        "import json, numpy as np, jax.numpy as jnp, refjit\n"
        "f = refjit.jit(lambda x: jnp.sum(jnp.tanh(x) * x))\n"
        "value = float(f(np.linspace(-1, 1, 100, dtype=np.float32)))\n"
        "print(json.dumps([value, refjit.compilation_cache_stats(),"
        " refjit.compilation_cache_dir()]))\n")
    env = dict(os.environ, REFJIT_CACHE_DIR=str(tmp_path))
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                      capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(2)]
    (value1, stats1, where), (value2, stats2, _) = runs
    assert where == str(tmp_path)
    assert stats1["misses"] >= 1 and stats1["hits"] == 0
    assert stats2["hits"] >= 1 and stats2["misses"] == 0 and stats2["errors"] == 0
    assert value1 == value2
    assert list(tmp_path.glob("*.rjcode"))


def test_the_compilation_cache_can_be_turned_off_and_moved(tmp_path):
    previous = refjit.compilation_cache_dir()
    try:
        refjit.set_compilation_cache_dir(None)
        assert refjit.compilation_cache_dir() is None
        refjit.set_compilation_cache_dir(tmp_path / "cache")
        assert refjit.compilation_cache_dir() == str(tmp_path / "cache")
        before = refjit.compilation_cache_stats()
        refjit.jit(lambda x: x * 3.0 - 1.0)(np.ones(5, np.float32))
        assert refjit.compilation_cache_stats()["misses"] == before["misses"] + 1
        assert len(list((tmp_path / "cache").glob("*.rjcode"))) == 1
    finally:
        refjit.set_compilation_cache_dir(previous)


def test_compiles_are_logged_when_asked(capfd):
    refjit.set_log_compiles(True)
    try:
        refjit.jit(lambda x: jnp.cos(x) * 2.5 + 0.25)(np.ones((3, 4), np.float32))
    finally:
        refjit.set_log_compiles(False)
    err = capfd.readouterr().err
    assert "refjit: compiled (f32[3,4]) -> (f32[3,4])" in err and " ms " in err
    refjit.jit(lambda x: jnp.sin(x) - 1.5)(np.ones(2, np.float32))
    assert "refjit: compiled" not in capfd.readouterr().err


def test_refjit_exact_math_in_the_environment_reaches_jit_and_compile(tmp_path):
    # REFJIT_EXACT_MATH=1 makes every compile call libm (docs/backend.md, "Transcendental
    # functions"), refjit.jit's and refjit.compile's too: the same bits as exact_math=True.
    import os
    import subprocess
    import sys
    x = np.linspace(-3, 3, 4001, dtype=np.float32)
    exact = refjit.jit(jnp.exp, exact_math=True)(x)
    approximate = refjit.jit(jnp.exp)(x)
    assert not np.array_equal(exact, approximate)  # else this test could not tell them apart
    script = (
        "import sys, numpy as np, jax.numpy as jnp, refjit\n"
        "x = np.linspace(-3, 3, 4001, dtype=np.float32)\n"
        "np.save(sys.argv[1], refjit.jit(jnp.exp)(x))\n"
        "refjit.compile(jnp.exp, x, path=sys.argv[2], name='f')\n")
    env = dict(os.environ, REFJIT_EXACT_MATH="1", REFJIT_CACHE="0")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "y.npy"),
                    str(tmp_path / "f.o")], env=env, check=True, capture_output=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), exact)
    # The object file calls libm's expf for each element instead of a vectorised polynomial.
    symbols = subprocess.run(["nm", str(tmp_path / "f.o")], check=True, capture_output=True,
                             text=True).stdout
    assert "expf" in symbols
