"""Errors reach Python as exceptions that say what was wrong and where, never as a crash:
refjit.Error and its subclasses (with the E-code), TypeError for bad arguments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import refjit


def test_an_unsupported_primitive_is_a_parse_error_naming_the_equation():
    def hurwitz_zeta(x):
        return jax.lax.zeta(x, x)

    with pytest.raises(refjit.ParseError) as e:
        refjit.jit(hurwitz_zeta)(np.ones(3, np.float32) * 2)
    assert "unknown primitive 'zeta'" in str(e.value)
    assert e.value.line == 1 and e.value.col > 0  # JAX prints a one-eqn jaxpr on one line
    assert "zeta" in e.value.equation
    assert e.value.equation.strip() in str(e.value)
    assert isinstance(e.value, refjit.Error)
    # It says where the list of supported primitives is, in the installed package too.
    assert "refjit.primitives()" in str(e.value)
    assert "zeta" not in refjit.primitives() and "cholesky" in refjit.primitives()


def test_a_type_check_error_in_traced_code_is_located():
    # A half-float Cholesky factor (LAPACK has none): refjit's rule refuses it, at JAX's
    # cholesky equation.
    with pytest.raises(refjit.TypeCheckError) as e:
        refjit.jit(jnp.linalg.cholesky)(np.eye(3, dtype=np.float16))
    assert e.value.line > 1 and e.value.col > 0
    assert "cholesky" in e.value.equation and e.value.equation.strip() in str(e.value)
    assert e.value.file == "<jaxpr of cholesky>"


@pytest.mark.parametrize("bad, what", [
    ("abc", "has type str, which is not an array"),
    (np.array(["a", "b"]), "has dtype <U1"),
    (np.zeros(2, "datetime64[s]"), "has dtype datetime64[s]"),
])
def test_bad_arguments_are_type_errors_naming_the_argument(bad, what):
    with pytest.raises(TypeError) as e:
        refjit.jit(lambda params, x: params["w"] * x)({"w": bad}, 1.0)
    assert "params['w'] (argument 0)" in str(e.value) and what in str(e.value)


def test_one_ref_reaching_a_function_twice_is_a_type_error():
    ref = jax.new_ref(jnp.zeros(3))

    def bump(r):
        r[...] += 1
        ref[...] += 2
        return r[...]

    jitted = refjit.jit(bump)
    np.testing.assert_array_equal(jitted(jax.new_ref(jnp.zeros(3))), np.ones(3))
    # The same types again: compiled code of the first call, which a check of refjit's own
    # keeps from running with one buffer as two refs (JAX's trace would have caught it).
    with pytest.raises(TypeError, match="same jax.Ref"):
        jitted(ref)
    np.testing.assert_array_equal(np.asarray(ref[...]), np.full(3, 2.0))


def test_wrong_argument_count_is_a_type_error():
    with pytest.raises(TypeError):
        refjit.jit(lambda x: x)(1.0, 2.0)


def test_ref_misuse_carries_its_code():
    def use_after_freeze(x):
        r = jax.new_ref(x)
        y = jax.freeze(r)
        r[...] = y * 2
        return y

    with pytest.raises(refjit.RefError) as e:
        refjit.jit(use_after_freeze)(np.ones(2, np.float32))
    assert e.value.code == "E12" and "froze" in str(e.value)


def test_shape_errors_in_the_program_are_type_check_errors():
    from refjit import _core

    with pytest.raises(refjit.TypeCheckError) as e:
        _core.parse("{ lambda ; a:f32[3] b:f32[4]. let\n    c:f32[3] = mul a b\n  in (c,) }",
                    "<test>")
    assert isinstance(e.value, TypeError) and "mul" in str(e.value)


def test_mismatched_tangents_are_type_errors():
    with pytest.raises(TypeError, match="shape"):
        refjit.jvp(jnp.sin, (np.ones(3, np.float32),), (np.ones(4, np.float32),))
    with pytest.raises(TypeError, match="structure"):
        refjit.jvp(jnp.sin, (np.ones(3, np.float32),), ())


def test_has_aux_needs_a_pair():
    with pytest.raises(TypeError, match=r"pair \(loss, aux\)"):
        refjit.grad(lambda x: jnp.sum(x), has_aux=True)(np.ones(2, np.float32))


def test_bad_argnums_is_a_value_error():
    with pytest.raises(ValueError, match="argnums"):
        refjit.grad(lambda x: jnp.sum(x), argnums=3)(np.ones(2, np.float32))


def test_a_function_needing_a_value_raises_jaxs_error_class_too():
    # refjit's TraceError is also the JAX error it stands for, so `except` clauses written for
    # jax.jit keep working, and the message ends with what JAX said.
    f = refjit.jit(lambda n, x: jax.lax.scan(lambda c, z: (c, z), x, (), n))
    with pytest.raises(jax.errors.ConcretizationTypeError,
                       match="lax.cond.*The `length` argument to `scan` expects a concrete"):
        f(3, 1.0)
    with pytest.raises(refjit.TraceError) as info:
        refjit.jit(lambda x: 1.0 if x > 0 else 2.0)(1.0)
    assert isinstance(info.value, jax.errors.TracerBoolConversionError)
