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
