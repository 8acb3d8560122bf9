"""refjit.jit: JAX functions compiled by refjit, called with pytrees of NumPy arrays, JAX
arrays and Python scalars, cached per argument types."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close

import refjit


def test_elementwise_matches_jax(rng):
    def f(x, y):
        return jnp.sin(x) * y + jnp.exp(-x * x)

    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    assert_tree_close(refjit.jit(f)(x, y), jax.jit(f)(x, y))


def test_pytrees_in_and_out_keep_their_structure(rng):
    def f(params, x, *, scale):
        h = jnp.tanh(x @ params["w"] + params["b"])
        return {"h": h * scale, "stats": (h.sum(), h.max())}

    params = {"w": rng.standard_normal((4, 3)).astype(np.float32),
              "b": rng.standard_normal(3).astype(np.float32)}
    x = rng.standard_normal((2, 4)).astype(np.float32)
    out = refjit.jit(f)(params, x, scale=2.0)
    assert set(out) == {"h", "stats"} and isinstance(out["stats"], tuple)
    assert_tree_close(out, jax.jit(f)(params, x, scale=2.0))


def test_python_scalars_and_jax_arrays_are_arguments():
    def f(x, n):
        return x * n + 1

    assert_tree_close(refjit.jit(f)(jnp.arange(3.0), 2), jax.jit(f)(jnp.arange(3.0), 2))
    out = refjit.jit(f)(1.5, 2.0)
    assert out.dtype == np.float32 and out.shape == () and float(out) == 4.0


def test_jax_arrays_of_every_dtype_give_what_numpy_arrays_give():
    # JAX arrays take a dispatch fast path (_tracing.to_arrays); the program and its results
    # are the ones NumPy arrays of the same values get.
    f = refjit.jit(lambda x: x * 2)
    for dtype in (np.float32, np.int32, np.uint8, np.int8, np.float16, jnp.bfloat16, np.bool_,
                  np.complex64):
        x = np.arange(6).reshape(2, 3).astype(dtype)
        got, want = f(jnp.asarray(x)), f(x)
        assert got.dtype == want.dtype == jax.jit(lambda x: x * 2)(x).dtype, dtype
        np.testing.assert_array_equal(got, want)
    assert len(f._entries) == 8  # one program per dtype, shared by both kinds of array


def test_a_jax_array_made_with_x64_on_is_narrowed_once_it_is_off():
    f = refjit.jit(lambda x: x + 1)
    with jax.enable_x64(True):
        wide = jnp.arange(3, dtype=jnp.int64)
        assert f(wide).dtype == np.int64
    out = f(wide)
    assert out.dtype == jax.jit(lambda x: x + 1)(wide).dtype == np.int32
    np.testing.assert_array_equal(out, [1, 2, 3])


def test_float64_inputs_are_traced_as_jax_would():
    # Without jax_enable_x64, JAX computes float64 inputs in float32; so does refjit.
    out = refjit.jit(lambda x: x * 2)(np.arange(3, dtype=np.float64))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_compiles_once_per_argument_types():
    traces = []

    def f(x):
        traces.append(x.shape)
        return x + 1

    g = refjit.jit(f)
    for _ in range(3):
        g(np.zeros(3, np.float32))
    g(np.zeros(4, np.float32))
    g(np.zeros(4, np.int32))
    assert traces == [(3,), (4,), (4,)]


def test_static_argnums_are_part_of_the_cache_key():
    traces = []

    def f(x, power):
        traces.append(power)
        return x ** power

    g = refjit.jit(f, static_argnums=1)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(g(x, 2), x ** 2)
    np.testing.assert_array_equal(g(x, 3), x ** 3)
    np.testing.assert_array_equal(g(x, 2), x ** 2)
    assert traces == [2, 3]


def test_interpreter_and_native_code_agree(rng):
    def f(x):
        c = jnp.cumsum(x, axis=1)
        return jnp.where(c > 0, jnp.log1p(c), c).sum(axis=0)

    x = rng.standard_normal((5, 6)).astype(np.float32)
    native = refjit.jit(f)(x)
    interpreted = refjit.jit(f, backend="interpreter")(x)
    np.testing.assert_allclose(native, interpreted, rtol=1e-5, atol=1e-6)
    assert_tree_close(native, jax.jit(f)(x))


def test_results_are_writable_numpy_arrays_that_do_not_alias_inputs():
    x = np.arange(3, dtype=np.float32)
    y = refjit.jit(lambda a: a)(x)
    assert isinstance(y, np.ndarray) and y.flags.writeable
    y[0] = 42
    assert x[0] == 0


def test_results_answer_block_until_ready_and_come_back_in_as_numpy_arrays():
    x = np.linspace(-2.0, 2.0, 7, dtype=np.float32)
    traces = []

    def f(a):
        traces.append(a.shape)
        return {"y": jnp.sin(a) * 2, "n": jnp.sum(a > 0)}

    g = refjit.jit(f)
    out = g(x)
    y = out["y"]
    assert type(y) is refjit.Array and isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, np.sin(x) * 2, rtol=1e-6)
    assert int(out["n"]) == 3
    # What a JAX user writes to time a call: both forms return the results themselves.
    assert y.block_until_ready() is y
    assert jax.block_until_ready(out) is out
    # What NumPy computes from a result is a plain array or scalar; a view stays a result.
    assert type(y + 1) is np.ndarray and type(y.sum()) is np.float32
    assert type(y[1:]) is refjit.Array and y[1:].block_until_ready() is not None
    z = out["y"].copy()
    alias = z
    z += 1  # in place, as on any NumPy array: the same object
    assert alias is z and type(z) is refjit.Array
    np.testing.assert_allclose(z, np.sin(x) * 2 + 1, rtol=1e-6)
    # Passed back in (a training loop's state), a result is taken as the NumPy array it is:
    # the same compiled program, through the dispatch fast path.
    again = g(y)
    np.testing.assert_allclose(again["y"], np.sin(np.sin(x) * 2) * 2, rtol=1e-6)
    assert traces == [(7,)]
    h = refjit.jit(lambda a: a * 3)
    h(y)
    h(y)
    assert len(h._fast_entries) == 1
    # JAX takes it as any NumPy array.
    np.testing.assert_allclose(jax.jit(lambda a: a * 3)(y), np.asarray(y) * 3, rtol=1e-6)


def test_donated_input_memory_becomes_the_result():
    def step(state, row, value):
        return jax.lax.dynamic_update_slice(state, jnp.full((1, 4), value), (row, 0))

    g = refjit.jit(step, donate_argnums=0)
    state = np.zeros((3, 4), np.float32)
    out = g(state, np.int32(1), np.float32(5))
    np.testing.assert_array_equal(out[1], [5, 5, 5, 5])
    assert np.shares_memory(out, state), "the donated buffer was copied"
    kept = np.zeros((3, 4), np.float32)
    out2 = refjit.jit(step)(kept, np.int32(1), np.float32(5))
    assert not np.shares_memory(out2, kept) and kept.sum() == 0


def test_refs_inside_the_function():
    def f(x):
        r = jax.new_ref(jnp.zeros_like(x))
        r[...] += x
        r[1] = 2.0
        return jax.freeze(r) * 3

    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(refjit.jit(f)(x), [0, 6, 6])


def test_decorator_form_and_wrapped_metadata():
    @refjit.jit(static_argnums=(1,))
    def scaled(x, k):
        """doc"""
        return x * k

    assert scaled.__name__ == "scaled" and scaled.__doc__ == "doc"
    np.testing.assert_array_equal(scaled(np.ones(2, np.float32), 3), [3, 3])


def test_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="backend"):
        refjit.jit(lambda x: x, backend="gpu")


def test_a_donated_array_passed_twice_is_read_not_reused():
    g = refjit.jit(lambda a, b: a * 2 + b, donate_argnums=0)
    x = np.arange(4, dtype=np.float32)
    out = g(x, x)
    np.testing.assert_array_equal(out, 3 * np.arange(4))
    np.testing.assert_array_equal(x, np.arange(4))


def test_make_jaxpr_gives_refjit_program_and_its_stages():
    def f(x):
        return jnp.sin(x) * 2

    j = refjit.make_jaxpr(f)(np.ones(3, np.float32))
    assert str(j).startswith("{ lambda ; a:f32[3]. let") and "sin a" in str(j)
    assert j.in_types == ["f32[3]"] and j.out_types == ["f32[3]"]
    assert "sin" in j.jax_text
    plan = refjit.make_jaxpr(f, stage="buffers")(np.ones(3, np.float32))
    assert str(plan).startswith("plan 0: top level")
    with pytest.raises(refjit.Error, match="unknown stage|bufers"):
        refjit.make_jaxpr(f, stage="bufers")(np.ones(3, np.float32))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_sixteen_bit_floats_round_like_jax(dtype, rng):
    def f(x, w):
        return jnp.tanh(x @ w) * 2 + jnp.exp(x[:, :2])

    x = rng.standard_normal((4, 3)).astype(dtype)
    w = rng.standard_normal((3, 2)).astype(dtype)
    got = refjit.jit(f)(x, w)
    want = jax.jit(f)(x, w)
    assert np.asarray(got).dtype == dtype
    # The matmul's running sum rounds at each step in refjit; XLA keeps it in f32.
    tol = 2e-2 if dtype == jnp.float16 else 8e-2
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_mixed_dtype_products_and_bool_argmax(backend, rng):
    # JAX's dot_general multiplies bool, int8 or bf16 by f32 in preferred_element_type;
    # argmax/argmin take bools (flax's accuracy on a mask, a one-hot times a weight matrix).
    w = rng.standard_normal((4, 3)).astype(np.float32)
    mask = rng.standard_normal((5, 4)) > 0
    small = np.arange(20, dtype=np.int8).reshape(5, 4)

    def f(mask, small, w):
        return (jnp.dot(mask, w), jnp.dot(small, w), jnp.dot(w.T.astype(jnp.bfloat16), mask.T),
                jnp.argmax(mask, axis=1), jnp.argmin(mask, axis=0), jnp.argmax(mask))

    mine, theirs = refjit.jit(f, backend=backend)(mask, small, w), jax.jit(f)(mask, small, w)
    for a, b in zip(mine, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                   rtol=1e-5, atol=1e-6)
    loss = lambda w: jnp.sum(jnp.dot(mask, w) ** 2)  # noqa: E731
    np.testing.assert_allclose(refjit.grad(loss, backend=backend)(w), jax.grad(loss)(w),
                               rtol=1e-5, atol=1e-6)


def test_lower_as_text_and_compile():
    # As jax.jit(f).lower(*args).compile(): the program at those types, any pipeline stage's
    # text, and a compiled function the later calls reuse.
    calls = []

    def f(x, y):
        calls.append(1)  # traced once: lower() and the calls share the compiled entry
        return jnp.tanh(x) @ y

    jitted = refjit.jit(f)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    y = np.ones((4, 2), np.float32)
    lowered = jitted.lower(x, y)
    assert lowered.as_text().startswith("{ lambda ; a:f32[3,4] b:f32[4,2]. let")
    assert "tanh" in lowered.as_text() and "dot_general" in lowered.jax_text
    assert lowered.as_text("buffers").startswith("plan 0")
    assert "define" in lowered.as_text("llvm")
    compiled = lowered.compile()
    assert compiled.compile_ms > 0
    np.testing.assert_allclose(compiled(x, y), np.tanh(x) @ y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jitted(x, y), np.tanh(x) @ y, rtol=1e-5, atol=1e-6)
    assert len(calls) == 1
    with pytest.raises(refjit.Error, match="nosuchpass"):
        lowered.as_text("nosuchpass")
    with pytest.raises(NotImplementedError, match="not XLA, so there is no HLO"):
        lowered.as_text("hlo")
    # Types alone, as JAX's lower takes them.
    by_type = jitted.lower(jax.ShapeDtypeStruct((3, 4), np.float32), y)
    assert by_type.as_text() == lowered.as_text() and len(calls) == 1


def test_lower_takes_a_ref_type():
    # jax.ShapeDtypeStruct(..., is_ref=True) stands for a ref argument, as in JAX.
    def bump(x_ref):
        x_ref[...] += 1.0
        x_ref[0] += 5.0

    compiled = refjit.jit(bump).lower(
        jax.ShapeDtypeStruct((4,), np.float32, is_ref=True)).compile()
    x_ref = jax.new_ref(np.arange(4, dtype=np.float32))
    compiled(x_ref)
    np.testing.assert_array_equal(x_ref[...], [6.0, 2.0, 3.0, 4.0])


def test_repeated_numpy_calls_take_the_dispatch_fast_path_and_stay_exact():
    f = lambda x, y: x * 2 + y  # noqa: E731
    jitted = refjit.jit(f)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(jitted(a, b), f(a, b))
    assert len(jitted._fast_entries) == 1
    # Arguments the fast path must not take as they are: a strided view, float64 (converted
    # to float32 with x64 off), a Python scalar (weakly typed), another shape.
    np.testing.assert_array_equal(jitted(a.T, b.T), f(a.T, b.T))
    got = jitted(a.astype(np.float64), b)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, f(a, b))
    assert jitted(a, 1.5).dtype == np.float32
    np.testing.assert_array_equal(jitted(a, 1.5), f(a, 1.5))
    np.testing.assert_array_equal(jitted(a[:1], b[:1]), f(a[:1], b[:1]))
    with jax.enable_x64():
        got = jitted(a.astype(np.float64), b.astype(np.float64))
        assert got.dtype == np.float64
        got = jitted(a.astype(np.float64), b.astype(np.float64))
        assert got.dtype == np.float64
    assert jitted(a.astype(np.float64), b).dtype == np.float32
