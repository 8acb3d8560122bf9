"""jax.debug.print and jax.debug.callback inside refjit functions: called when the compiled
program runs, with the values JAX passes, as often as JAX calls them, never dropped because
nothing reads a result. refjit calls them in program order; JAX's eager run is the reference
(jax.jit's code may call unordered callbacks in another order)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import refjit

BACKENDS = ["native", "interpreter"]


def recorder():
    """A callback that keeps copies of what it is called with, and the list it keeps them in."""
    seen = []

    def record(*xs):
        seen.append([np.array(x) for x in xs])

    return record, seen


def assert_same_calls(got, want):
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-6)


def with_calls(make, run):
    """(result, calls) of run(f) where f = make(callback)."""
    record, seen = recorder()
    out = run(make(record))
    return out, seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_debug_print_prints_what_jax_jit_prints(backend, capsys):
    def f(x, n):
        jax.debug.print("x={x} total={t} n={n}", x=x, t=jnp.sum(x), n=n)
        return x * 2

    x = np.arange(4, dtype=np.float32)
    jax.jit(f)(x, np.int32(7))
    jax.effects_barrier()
    want = capsys.readouterr().out
    np.testing.assert_array_equal(refjit.jit(f, backend=backend)(x, np.int32(7)), x * 2)
    assert capsys.readouterr().out == want
    assert want == "x=[0. 1. 2. 3.] total=6.0 n=7\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_callbacks_get_their_operands_in_program_order(backend):
    def make(cb):
        def f(x, i):
            jax.debug.callback(cb, x, i)
            y = jnp.sin(x)
            jax.debug.callback(cb, y[1:])  # a view of a buffer: passed as its own array
            jax.debug.callback(cb, y.astype(jnp.bfloat16), (i > 2), jnp.complex64(1 + 2j) * x)
            return y

        return f

    args = (np.linspace(0, 1, 5, dtype=np.float32), np.int32(3))
    want_out, want = with_calls(make, lambda f: f(*args))
    got_out, got = with_calls(make, lambda f: refjit.jit(f, backend=backend)(*args))
    np.testing.assert_allclose(got_out, want_out, rtol=1e-6)
    assert_same_calls(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_callback_whose_values_nothing_else_reads_is_still_called(backend):
    def make(cb):
        def f(x):
            def body(c, x):
                jax.debug.callback(cb, x)
                return c, None

            lax.scan(body, 0.0, x)  # the scan's results are unused
            jax.debug.callback(cb, x * 3)
            return jnp.float32(1)

        return f

    x = np.arange(3, dtype=np.float32)
    _, want = with_calls(make, lambda f: f(x))
    _, got = with_calls(make, lambda f: refjit.jit(f, backend=backend)(x))
    assert len(got) == 4
    assert_same_calls(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_loops_call_once_per_iteration_and_cond_in_the_branch_taken(backend):
    def make(cb):
        def f(x):
            def body(c, x):
                jax.debug.callback(cb, c, x)
                return c * 2 + x, c

            c, ys = lax.scan(body, jnp.float32(1), x)

            def while_body(s):
                jax.debug.callback(cb, s)
                return s + 1

            n = lax.while_loop(lambda s: s < 3, while_body, jnp.int32(0))
            r = lax.cond(c > 10, lambda v: (jax.debug.callback(cb, v), v + 1)[1],
                         lambda v: v - 1, c)
            return ys, n, r

        return f

    x = np.arange(4, dtype=np.float32)
    want_out, want = with_calls(make, lambda f: f(x))
    got_out, got = with_calls(make, lambda f: refjit.jit(f, backend=backend)(x))
    for g, w in zip(got_out, want_out):
        np.testing.assert_allclose(g, w)
    assert len(want) == 4 + 3 + 1
    assert_same_calls(got, want)


def scan_and_while(cb):
    def f(x):
        jax.debug.callback(cb, x)

        def body(c, xi):
            jax.debug.callback(cb, c)
            return jnp.sin(c) * xi, None

        c, _ = lax.scan(body, x[0], x)

        def while_body(s):
            k, v = s
            jax.debug.callback(cb, v)
            return k + 1, v * jnp.cos(v)

        _, v = lax.while_loop(lambda s: s[0] < 2, while_body, (0, c))
        return v * 3

    return f


@pytest.mark.parametrize("backend", BACKENDS)
def test_derivatives_call_it_on_the_primal_values_as_jax_does(backend):
    x = np.array([0.5, 0.7, 0.9], np.float32)
    t = np.array([1.0, -1.0, 2.0], np.float32)

    want_out, want = with_calls(scan_and_while, lambda f: jax.jvp(f, (x,), (t,)))
    got_out, got = with_calls(scan_and_while, lambda f: refjit.jvp(f, (x,), (t,)))
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5)
    assert len(want) == 1 + 3 + 2
    assert_same_calls(got, want)

    # linearize: the calls are made once, when the primal runs; evaluating the linear
    # function makes none (JAX's linearize the same).
    def linearized(f):
        y, f_jvp = refjit.linearize(f, x)
        return y, f_jvp(t)

    got_out, got = with_calls(scan_and_while, linearized)
    np.testing.assert_allclose(got_out[1], want_out[1], rtol=1e-5)
    assert_same_calls(got, want)

    # grad (reverse mode through while_loop is refused, by JAX too): one call per primal
    # value, none on the backward pass.
    def scan_only(cb):
        def f(x):
            jax.debug.callback(cb, x)

            def body(c, xi):
                jax.debug.callback(cb, c, xi)
                return jnp.sin(c) * xi, c

            c, ys = lax.scan(body, x[0], x)
            return c + jnp.sum(ys)

        return f

    want_g, want = with_calls(scan_only, lambda f: jax.grad(f)(x))
    got_g, got = with_calls(scan_only, lambda f: refjit.grad(f, backend=backend)(x))
    np.testing.assert_allclose(got_g, want_g, rtol=1e-5)
    assert len(want) == 1 + 3
    assert_same_calls(got, want)


def test_vmap_calls_it_once_per_example_as_jax_vmap_does():
    def make(cb):
        def f(x):
            jax.debug.callback(cb, x, jnp.sum(x))
            return x * 2

        return f

    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    want_out, want = with_calls(make, lambda f: jax.vmap(f)(xs))
    got_out, got = with_calls(make, lambda f: jax.vmap(refjit.jit(f))(xs))
    np.testing.assert_array_equal(got_out, want_out)
    assert len(want) == 2
    assert_same_calls(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_in_the_callback_reaches_the_caller(backend):
    calls = []

    def cb(x):
        calls.append(float(x))
        if x > 0:
            raise ValueError(f"saw {x}")

    def f(x):
        def body(c, _):
            jax.debug.callback(cb, c)
            return c + 1, None

        return lax.scan(body, x, None, length=3)[0]

    jitted = refjit.jit(f, backend=backend)
    with pytest.raises(ValueError, match="saw 1"):
        jitted(np.float32(0))
    # The run makes no call after the one that raised; the next run calls again.
    assert calls == [0.0, 1.0]
    np.testing.assert_array_equal(jitted(np.float32(-5)), np.float32(-2))
    assert calls == [0.0, 1.0, -5.0, -4.0, -3.0]


def test_refjit_compile_refuses_a_host_call(tmp_path):
    def f(x):
        jax.debug.print("{}", x)
        return x + 1

    with pytest.raises(refjit.Error, match="host function"):
        refjit.compile(f, np.float32(1), path=str(tmp_path / "f.o"))


def test_a_call_inside_jax_jit_prints_at_every_run_not_at_trace_time(capsys):
    @refjit.jit
    def show(x):
        jax.debug.print("x={}", x)
        return x + 1

    @jax.jit
    def outer():
        return show(np.float32(1))  # concrete: still staged, to print when outer runs

    assert capsys.readouterr().out == ""
    outer()
    outer()
    jax.effects_barrier()
    assert capsys.readouterr().out == "x=1.0\nx=1.0\n"


def test_a_process_that_made_host_calls_exits_cleanly():
    # The handler refjit's runtime holds outlives the interpreter: releasing it at exit,
    # after Python has shut down, aborted the process.
    import subprocess
    import sys

    code = ("import jax, numpy as np, refjit\n"
            "refjit.jit(lambda x: (jax.debug.print('v={}', x), x + 1)[1])(np.float32(2))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "v=2.0\n"
    assert "Fatal" not in done.stderr
