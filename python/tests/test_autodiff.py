"""refjit's own autodiff on JAX functions: grad, value_and_grad, vjp (with gradient
accumulators), jvp and linearize, checked against JAX and against finite differences."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close, finite_difference

import refjit


def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"]
    return jnp.mean((logits - y) ** 2)


@pytest.fixture
def mlp(rng):
    params = {"w1": rng.standard_normal((4, 8)).astype(np.float32) * 0.5,
              "b1": rng.standard_normal(8).astype(np.float32) * 0.1,
              "w2": rng.standard_normal((8, 2)).astype(np.float32) * 0.5}
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = rng.standard_normal((5, 2)).astype(np.float32)
    return params, x, y


def test_grad_of_a_pytree_matches_jax(mlp):
    assert_tree_close(refjit.grad(mlp_loss)(*mlp), jax.grad(mlp_loss)(*mlp))


def test_grad_argnums_tuple_and_value(mlp):
    value, grads = refjit.value_and_grad(mlp_loss, argnums=(0, 1))(*mlp)
    jvalue, jgrads = jax.value_and_grad(mlp_loss, argnums=(0, 1))(*mlp)
    assert_tree_close((value, grads), (jvalue, jgrads))


def test_grad_has_aux(mlp):
    def loss_with_aux(params, x, y):
        loss = mlp_loss(params, x, y)
        return loss, {"loss": loss, "norm": jnp.sum(params["w1"] ** 2)}

    (value, aux), g = refjit.value_and_grad(loss_with_aux, has_aux=True)(*mlp)
    (jvalue, jaux), jg = jax.value_and_grad(loss_with_aux, has_aux=True)(*mlp)
    assert_tree_close((value, aux, g), (jvalue, jaux, jg))
    g2, aux2 = refjit.grad(loss_with_aux, has_aux=True)(*mlp)
    assert_tree_close((g2, aux2), (jg, jaux))


def test_grad_agrees_with_finite_differences(rng):
    def f(x):
        return jnp.sum(jnp.sin(x) * jnp.log1p(x * x))

    x = rng.standard_normal(5).astype(np.float32)
    g = refjit.grad(f)(x)
    np.testing.assert_allclose(g, finite_difference(refjit.jit(f), x), rtol=2e-2, atol=2e-3)


def test_grad_through_refs_which_jax_cannot_differentiate():
    # JAX 0.10's own grad fails on this function (an indexed write into a new_ref);
    # refjit differentiates it: f = sum(r) * sum(x), r = x with r[1] = 2.
    def f(x):
        r = jax.new_ref(jnp.zeros(3))
        r[...] += x
        r[1] = 2.0
        return jax.freeze(r).sum() * x.sum()

    x = np.array([1.0, 2.0, 3.0], np.float32)
    g = refjit.grad(f)(x)
    np.testing.assert_allclose(g, [6 + 6, 6, 6 + 6])
    np.testing.assert_allclose(g, finite_difference(refjit.jit(f), x), rtol=1e-2)


def test_no_grad_no_remat_ref_is_left_alone_by_grad():
    # jax.new_ref(x, kind="no_grad_no_remat"): the differentiated write into the ref drops its
    # tangent and the read back is a constant, so d/dx (r + x*x) = 2x. A plain ref gives 2 + 2x.
    def f(x, kind):
        r = jax.new_ref(x, kind=kind)
        r[...] += x
        return r[...] + x * x

    x = np.float32(3.0)
    assert float(refjit.grad(lambda x: f(x, "no_grad_no_remat"))(x)) == 6.0
    assert float(refjit.grad(lambda x: f(x, None))(x)) == 8.0


def test_grad_rejects_integer_arguments_naming_them():
    with pytest.raises(TypeError, match=r"n \(argument 1\) has dtype int32"):
        refjit.grad(lambda x, n: x * n, argnums=1)(1.0, 2)


def test_grad_needs_a_scalar_output():
    with pytest.raises(TypeError, match="float scalar"):
        refjit.grad(lambda x: x * 2)(np.ones(3, np.float32))


def test_jvp_matches_jax(mlp):
    params, x, y = mlp
    tangents = jax.tree_util.tree_map(np.ones_like, params)
    f = lambda p: mlp_loss(p, x, y)
    out, t = refjit.jvp(f, (params,), (tangents,))
    jout, jt = jax.jvp(f, (params,), (tangents,))
    assert_tree_close((out, t), (jout, jt))


def test_linearize_applies_the_linear_map_many_times(rng):
    def f(x):
        return jnp.tanh(x) * jnp.sum(x ** 2)

    x = rng.standard_normal(4).astype(np.float32)
    out, f_jvp = refjit.linearize(f, x)
    jout, jf_jvp = jax.linearize(f, x)
    assert_tree_close(out, jout)
    for k in range(3):
        t = np.eye(4, dtype=np.float32)[k]
        assert_tree_close(f_jvp(t), jf_jvp(t))


def test_vjp_is_reusable_and_matches_jax(mlp):
    params, x, y = mlp
    out, f_vjp = refjit.vjp(mlp_loss, params, x, y)
    jout, jf_vjp = jax.vjp(mlp_loss, params, x, y)
    assert_tree_close(out, jout)
    for ct in (1.0, 2.5):
        assert_tree_close(f_vjp(np.float32(ct)), jf_vjp(np.float32(ct)))


def test_vjp_with_refs_accumulates_in_place(mlp):
    params, x, y = mlp
    _, f_vjp = refjit.vjp(mlp_loss, params, x, y)
    grads = jax.tree_util.tree_map(np.zeros_like, params)
    acc = f_vjp.with_refs(grads, refjit.DontWant, refjit.DontWant)
    for _ in range(3):  # three microbatches' gradients, summed where they are
        g_params, g_x, g_y = acc(np.float32(1.0))
        assert g_x is None and g_y is None
        assert g_params["w1"] is grads["w1"]
    expected = jax.tree_util.tree_map(lambda g: 3 * np.asarray(g), jax.grad(mlp_loss)(*mlp))
    assert_tree_close(grads, expected, rtol=5e-5)


def test_vjp_with_refs_errors_carry_their_codes(mlp):
    params, x, y = mlp
    _, f_vjp = refjit.vjp(mlp_loss, params, x, y)
    with pytest.raises(refjit.RefError) as e:
        f_vjp.with_refs(refjit.GradValue)
    assert e.value.code == "E3"
    wrong = jax.tree_util.tree_map(lambda a: np.zeros(a.shape, np.float64), params)
    with pytest.raises(refjit.RefError) as e:
        f_vjp.with_refs(wrong, refjit.DontWant, refjit.DontWant)(np.float32(1))
    assert e.value.code == "E6"
    same = np.zeros((5, 4), np.float32)
    _, g_vjp = refjit.vjp(lambda a, b: jnp.sum(a * b), x, x)
    with pytest.raises(refjit.RefError) as e:
        g_vjp.with_refs(same, same)(np.float32(1))
    assert e.value.code == "E7"


def test_vjp_has_aux(rng):
    def f(x):
        return jnp.sin(x), {"sum": jnp.sum(x)}

    x = rng.standard_normal(3).astype(np.float32)
    out, f_vjp, aux = refjit.vjp(f, x, has_aux=True)
    jout, jf_vjp, jaux = jax.vjp(f, x, has_aux=True)
    ct = np.ones(3, np.float32)
    assert_tree_close((out, aux, f_vjp(ct)), (jout, jaux, jf_vjp(ct)))


def test_integer_primals_get_float0_cotangents():
    out, f_vjp = refjit.vjp(lambda x, n: x * n, np.float32(2), np.int32(3))
    gx, gn = f_vjp(np.float32(1))
    assert float(gx) == 3.0 and gn.dtype == jax.dtypes.float0


def test_custom_vjp_rules_written_in_python_are_applied():
    # The bwd rule is deliberately not the derivative (2 cos x): refjit must use it, as JAX.
    @jax.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    f.defvjp(lambda x, y: (jnp.sin(x) * y, (jnp.cos(x), y, x)),
             lambda res, g: (2 * res[0] * g * res[1], g * jnp.sin(res[2])))

    def loss(x, y):
        return jnp.sum(f(x, y) ** 2)

    x = np.linspace(0, 1, 3, dtype=np.float32)
    y = np.full(3, 2.0, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_tree_close(refjit.grad(loss, argnums=(0, 1))(x, y),
                          jax.grad(loss, argnums=(0, 1))(x, y))
        out, f_vjp = refjit.vjp(loss, x, y)
        assert_tree_close(f_vjp(np.float32(1)), jax.vjp(loss, x, y)[1](np.float32(1)))
    assert "bwd_jaxpr=" in str(refjit.make_jaxpr(loss)(x, y))


def test_custom_vjp_rules_capturing_arrays_are_applied():
    weights = np.array([1.0, 2.0, 3.0], np.float32)
    offsets = np.array([0.5, 0.0, -0.5], np.float32)

    @jax.custom_vjp
    def scaled(x):
        return jnp.sin(x) + offsets

    scaled.defvjp(lambda x: (jnp.sin(x) + offsets, jnp.cos(x)), lambda c, g: (c * g * weights,))
    x = np.linspace(0, 1, 3, dtype=np.float32)

    def loss(v):
        return jnp.sum(scaled(v) ** 2)

    assert_tree_close(refjit.jit(loss)(x), jax.jit(loss)(x))
    assert_tree_close(refjit.grad(loss)(x), jax.grad(loss)(x))


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_linearize_refuses_a_custom_vjp_whose_bwd_has_no_forward_map(backend):
    # bwd clips the cotangent: not linear, so no forward map is its transpose. linearize's
    # tangents used to come out as zeros; now running them is refused (JAX refuses
    # forward mode of any custom_vjp function), while reverse mode applies the rule.
    @jax.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def f(x):
        return clip_grad(x) * 3.0

    x = np.float32(2.0)
    y, f_jvp = refjit.linearize(f, x, backend=backend)
    np.testing.assert_allclose(y, 6.0)
    with pytest.raises(refjit.Error, match="linear map of a custom_vjp function"):
        f_jvp(np.float32(1))
    np.testing.assert_allclose(refjit.grad(f, backend=backend)(x), jax.grad(f)(x))
    np.testing.assert_allclose(refjit.grad(f, backend=backend)(x), 0.1)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_a_custom_vjp_bwd_that_cannot_be_traced_fails_only_when_a_backward_pass_runs(backend):
    # bwd returns one cotangent for two arguments: JAX raises a TypeError when it calls bwd,
    # and runs the function, its vjp's forward pass and gradients not through it.
    @jax.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: g)
    np.testing.assert_allclose(refjit.jit(f, backend=backend)(2.0, 3.0), 6.0)
    out, f_vjp = refjit.vjp(f, np.float32(2), np.float32(3), backend=backend)
    np.testing.assert_allclose(out, 6.0)
    with pytest.raises(TypeError, match="custom_vjp's bwd rule .* could not be traced"):
        f_vjp(np.float32(1))
    with pytest.raises(TypeError, match="Custom VJP bwd rule must produce"):
        refjit.grad(f, backend=backend)(2.0, 3.0)

    def not_through_f(x, y):
        return (f(x, y), x * 2.0)[1]

    np.testing.assert_allclose(refjit.grad(not_through_f, backend=backend)(2.0, 3.0), 2.0)


def test_a_custom_vjp_whose_outputs_get_no_cotangent_does_not_run_its_bwd():
    # JAX's backward pass skips the rule when no cotangent reaches its outputs: this bwd
    # (writing a float into an int ref) would fail if run.
    @jax.custom_vjp
    def stash_grads(grads_ref, x):
        return x

    def stash_grads_bwd(grads_ref, g):
        grads_ref[...] = g
        return None, g

    stash_grads.defvjp(lambda grads_ref, x: (x, grads_ref), stash_grads_bwd)

    @jax.remat
    def f(x_ref, y):
        stash_grads(x_ref, y)
        return y * 3.0

    x_ref = jax.new_ref(0)
    np.testing.assert_allclose(refjit.grad(f, 1)(x_ref, 3.14), 3.0)
    assert int(x_ref[...]) == 0


def test_custom_vjp_inside_checkpoint_keeps_its_rules():
    # jax.checkpoint's body is an open jaxpr param (remat2): the custom_vjp inside it must be
    # traced into refjit's form too, not differentiated through its primal (which gives 2x).
    @jax.custom_vjp
    def doubled_grad(x):
        return jnp.sin(x)

    doubled_grad.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (4.0 * c * g,))

    def loss(x):
        return jnp.sum(jax.checkpoint(lambda v: doubled_grad(v) * 2.0)(x))

    x = np.linspace(0, 1, 4, dtype=np.float32)
    assert_tree_close(refjit.grad(loss)(x), jax.grad(loss)(x))
    assert_tree_close(refjit.grad(loss)(x), 8.0 * np.cos(x))


def test_custom_vjp_fwd_calling_its_own_jitted_function():
    # The fwd rule calls the jitted function being traced: refjit inlines it, no recursion.
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)

    jitted = refjit.jit(lambda x: f(x) * 3.0)
    f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (c * g,))
    x = np.linspace(0, 1, 3, dtype=np.float32)
    assert_tree_close(jitted(x), 3.0 * np.sin(x))
    assert_tree_close(refjit.grad(lambda v: jnp.sum(jitted(v)))(x), 3.0 * np.cos(x))


@pytest.mark.parametrize("fn", [jax.nn.relu, jax.nn.relu6, lambda v: jnp.logaddexp(v, -v),
                                jax.nn.softplus, jax.nn.silu, jax.nn.gelu])
def test_custom_jvp_rules_of_jax_nn_are_applied_at_their_kinks(fn):
    # jax.nn.relu's rule gives 0 at 0 where the primal's derivative (max) gives 0.5.
    x = np.array([0.0, 6.0, -1.0, 1.5, 0.0], np.float32)

    def loss(v):
        return jnp.sum(fn(v) * jnp.arange(1.0, 6.0))

    assert_tree_close(refjit.grad(loss)(x), jax.grad(loss)(x))
    t = np.linspace(-1, 1, 5, dtype=np.float32)
    assert_tree_close(refjit.jvp(loss, (x,), (t,)), jax.jvp(loss, (x,), (t,)))
    assert_tree_close(refjit.linearize(loss, x)[1](t), jax.linearize(loss, x)[1](t))


def test_custom_jvp_rules_are_applied_under_vmap_scan_and_second_derivatives():
    @jax.custom_jvp
    def clipped(x, k):  # an integer operand, and a rule that is not the derivative
        return jnp.clip(x, -1.0, 1.0) * k

    @clipped.defjvp
    def clipped_jvp(primals, tangents):
        x, k = primals
        return clipped(x, k), jnp.cos(x) * tangents[0] * k

    xs = np.array([[0.5, 2.0], [-3.0, 0.25]], np.float32)

    def loss(v):
        def step(c, row):
            return c + jnp.sum(jax.vmap(lambda e: clipped(e, 3))(row) * c), None
        return jax.lax.scan(step, jnp.float32(1.0), v)[0]

    assert_tree_close(refjit.grad(loss)(xs), jax.grad(loss)(xs))
    assert_tree_close(jax.vmap(refjit.grad(loss))(np.stack([xs, 2 * xs])),
                      jax.vmap(jax.grad(loss))(np.stack([xs, 2 * xs])))
    # The rule's own derivative: d/dx (cos x * 3) = -3 sin x.
    second = refjit.grad(refjit.grad(lambda v: clipped(v, 3)))(np.float32(0.5))
    assert_tree_close(second, jax.grad(jax.grad(lambda v: clipped(v, 3)))(np.float32(0.5)))


def test_custom_jvp_rule_capturing_arrays_is_applied():
    scale = np.array([1.0, -2.0, 0.5], np.float32)

    @jax.custom_jvp
    def f(x):
        return jnp.sin(x) * scale

    f.defjvp(lambda p, t: (f(p[0]), t[0] * scale * 10.0))
    x = np.linspace(0, 1, 3, dtype=np.float32)
    assert_tree_close(refjit.grad(lambda v: jnp.sum(f(v)))(x), np.float32(10.0) * scale)
    assert_tree_close(refjit.jit(f)(x), np.sin(x) * scale)


def test_accumulators_sharing_memory_are_refused():
    def loss(a, b):
        return jnp.sum(a * b)

    x = np.ones(4, np.float32)
    _, f_vjp = refjit.vjp(loss, x, x)
    buffer = np.zeros(8, np.float32)
    with pytest.raises(refjit.RefError) as e:
        f_vjp.with_refs(buffer[:4], buffer[2:6])(np.float32(1))
    assert e.value.code == "E7" and "shares memory" in str(e.value)
    assert not buffer.any()


@pytest.mark.parametrize("dtype", [jnp.bfloat16, np.float16])
def test_half_float_derivatives_are_jaxs(dtype):
    # bfloat16 is no np.floating subtype for NumPy: refjit must still differentiate it.
    x = jnp.array([1.0, 2.0, -0.5], dtype=dtype)
    t = jnp.ones(3, dtype=dtype)
    scale = jnp.array([2.0, 3.0, 4.0], dtype=dtype)  # a captured constant of the same dtype

    def f(v):
        return jnp.sin(v) * scale

    assert_tree_close(refjit.jvp(f, (x,), (t,)), jax.jvp(f, (x,), (t,)), rtol=1e-2)
    out, back = refjit.vjp(f, x)
    assert back(t)[0].dtype == dtype
    assert_tree_close(back(t), jax.vjp(f, x)[1](t), rtol=1e-2)
    assert_tree_close(refjit.grad(lambda v: jnp.sum(f(v)))(x),
                      jax.grad(lambda v: jnp.sum(f(v)))(x), rtol=1e-2)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.bool_])
def test_a_captured_0d_constant_stays_0d(dtype):
    inc = jnp.array(1, dtype=dtype)
    f = lambda x: x + inc  # noqa: E731
    x = np.arange(3).astype(np.int32 if dtype == np.bool_ else dtype)
    assert_tree_close(refjit.jit(f)(x), np.asarray(f(x)))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, np.float16])
def test_half_float_scatter_combines_compile(dtype):
    # A scatter-add/mul combines the element already there with an update in f32: both must
    # be widened (the update is the eqn's operand 2, not 1).
    x = jnp.array([1.0, 2.0, 3.0, 4.0], dtype)

    def f(v):
        idx = jnp.array([0, 0, 1, 3], jnp.int32)
        return jnp.sum(v.at[idx].add(v ** 2)
                       + v.at[jnp.array([0, 2, 1, 3])].mul(jnp.tanh(v), unique_indices=True))

    assert_tree_close(refjit.jit(f)(x), jax.jit(f)(x), rtol=1e-2)
    assert_tree_close(refjit.jvp(f, (x,), (x,)), jax.jvp(f, (x,), (x,)), rtol=1e-2)


@pytest.mark.parametrize("scatter", [jax.lax.scatter_add, jax.lax.scatter, jax.lax.scatter_max,
                                     jax.lax.scatter_min])
def test_scatter_and_gather_windows_shorter_than_a_dim_no_index_moves(scatter):
    # Rows 0 and 2 are indexed; the window covers only the first 3 of the 5 columns.
    x = np.arange(25, dtype=np.float32).reshape(5, 5) / 7.0
    idx = np.array([[0], [2]], np.int32)
    upd = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    sdn = jax.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                          scatter_dims_to_operand_dims=(0,))
    gdn = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                         start_index_map=(0,))

    def loss(x, u):
        y = scatter(x, idx, u, sdn)
        return jnp.sum(jnp.sin(y)) + jnp.sum(jax.lax.gather(y, idx, gdn, (1, 3)) ** 2)

    assert_tree_close(refjit.jit(loss)(x, upd), jax.jit(loss)(x, upd))
    assert_tree_close(refjit.grad(loss, (0, 1))(x, upd), jax.grad(loss, (0, 1))(x, upd))


@pytest.mark.parametrize("backend", ["native", "interpreter"])
@pytest.mark.parametrize("start", [2, 7, -3])  # in range, clamped (or dropped), negative
def test_one_element_windows_on_indexed_dims_from_vmap(backend, start):
    # vmap of a dynamic_slice / dynamic_update_slice with an unbatched start prints a gather /
    # scatter whose indexed dim keeps a window of one element (not collapsed or inserted).
    def f(x, i, u):
        g = jax.vmap(lambda r: jax.lax.dynamic_slice(r, (i,), (1,)))(x)
        s = jax.vmap(lambda r, v: jax.lax.dynamic_update_slice(r, v, (i,)))(x, u)
        a = jax.vmap(lambda r, v: r.at[i].add(v[0]))(x, u)
        return jnp.sum(jnp.sin(g)) + jnp.sum(s * s) + jnp.sum(jnp.cos(a) * x)

    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 5.0
    u = np.array([[1.0], [2.0], [3.0]], np.float32)
    assert_tree_close(refjit.jit(f, backend=backend)(x, start, u), jax.jit(f)(x, start, u))
    assert_tree_close(refjit.grad(f, (0, 2), backend=backend)(x, start, u),
                      jax.grad(f, (0, 2))(x, start, u), rtol=1e-5)


def test_pow_slopes_at_zero_are_jaxs():
    # A float exponent: d/dx 0^0 = 0 * 0^-1 = NaN in JAX; an integer one: 0.
    for f, args in [(jax.lax.pow, (0.0, 0.0)), (jax.lax.pow, (0.0, 2.0)),
                    (lambda x, n: x ** n, (0.0, 0)), (lambda x, n: x ** n, (0.0, 3))]:
        assert_tree_close(refjit.grad(f)(*args), jax.grad(f)(*args))
    second = refjit.jvp(lambda x: refjit.grad(jax.lax.pow, (0, 1))(x, 0.0), (4.0,), (1.0,))[1]
    assert_tree_close(second, (np.float32(0.0), np.float32(0.25)))


def test_a_custom_jvp_rule_calling_custom_functions_keeps_their_rules_for_second_order():
    # slogdet of a 1x1 complex matrix is a custom_jvp whose rule calls slogdet again: the
    # second derivative through refjit's own first derivative must use that inner rule
    # (inlining its primal, whose sign has a zero derivative, gave another number).
    a = np.array([[1.2 - 0.7j]], np.complex64)
    t = np.array([[0.3 + 0.4j]], np.complex64)
    f = lambda a: jnp.linalg.slogdet(a)  # noqa: E731
    ours = refjit.jvp(lambda a: refjit.jvp(f, (a,), (t,))[1], (a,), (t,))
    theirs = jax.jvp(lambda a: jax.jvp(f, (a,), (t,))[1], (a,), (t,))
    assert_tree_close(ours, theirs, rtol=1e-5)
    # relu's rule calls relu: third derivatives through refjit's nested derivatives are JAX's.
    x = np.linspace(-1, 1, 5).astype(np.float32)
    g = lambda x: jnp.sum(jax.nn.relu(x) ** 3 + jax.nn.gelu(x))  # noqa: E731
    second = refjit.grad(lambda x: jnp.sum(refjit.grad(g)(x) * x))
    third = refjit.grad(lambda x: jnp.sum(second(x) * x))
    jax_second = jax.grad(lambda x: jnp.sum(jax.grad(g)(x) * x))
    assert_tree_close(third(x), jax.grad(lambda x: jnp.sum(jax_second(x) * x))(x), rtol=1e-4,
                      atol=1e-5)


def test_a_dead_scan_carry_does_not_poison_the_gradient():
    # Random program 7418: a scan carry nothing reads, whose derivative is 0 * inf (the norm
    # of zeros), gave NaN; the DCE now drops dead carries and ys outputs, as JAX's does.
    from jax import lax

    def f(a):
        z = a * 0.0  # the norm's derivative at 0 is 0/0

        def body(c, x):
            return jnp.broadcast_to(jnp.tanh(jnp.linalg.norm(z)), (3,)), x * a[0]

        _, ys = lax.scan(body, jnp.zeros(3), jnp.arange(2.0))
        return jnp.sum(ys)

    a = np.array([1.0, 2.0], np.float32)
    assert_tree_close(refjit.grad(f)(a), jax.grad(f)(a))
