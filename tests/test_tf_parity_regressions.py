"""Differences from TF 2.21 found by running the same code through both (stop 9 review);
expected values are TF's, derived by hand below."""
import numpy as np
import pytest

import jitgrad as tf

graph_modes = pytest.mark.usefixtures("graph_mode")


@graph_modes
def test_read_under_control_dependencies_sees_the_assignment():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        with tf.control_dependencies([v.assign([5.0, 5.0])]):
            reads = [v.read_value(), v * 1.0, tf.identity(v), v.value()]
        plain = v * 1.0
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        for r in s.run(reads):
            np.testing.assert_array_equal(r, [5.0, 5.0])
        s.run(init)
        np.testing.assert_array_equal(s.run(plain), [1.0, 2.0])    # no dependency: no assignment


@graph_modes
def test_read_after_a_grouped_training_step():
    """TF 1 idiom: evaluate the loss after the update in the same run."""
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(3.0)
        loss = w * w
        train = tf.compat.v1.train.GradientDescentOptimizer(0.25).minimize(loss)
        with tf.control_dependencies([train]):
            loss_after = w * w
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        before, after = s.run([loss, loss_after])
        assert before == 9.0 and after == 2.25          # w: 3 - 0.25 * 6 = 1.5
        assert s.run(w) == 1.5


@graph_modes
def test_constant_with_both_signed_zeros():
    """-0.0 == 0.0, but a constant holding both is not 'uniformly zero'."""
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(np.float32([-0.0, 0.0]))
        y = tf.constant(np.float32([0.0, -0.0]))
        outs = [1.0 / x, x * 1.0, -x] + tf.gradients(tf.math.log(x), x) + tf.gradients(tf.sqrt(y), y)
    with tf.compat.v1.Session(graph=g) as s:
        inv, same, neg, dlog, dsqrt = s.run(outs)
    np.testing.assert_array_equal(inv, [-np.inf, np.inf])
    assert np.signbit(same).tolist() == [True, False]
    assert np.signbit(neg).tolist() == [False, True]
    np.testing.assert_array_equal(dlog, [-np.inf, np.inf])
    np.testing.assert_array_equal(dsqrt, [np.inf, -np.inf])      # 0.5 / sqrt(+-0) = +-inf


def test_none_output_gradient_means_no_contribution():
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as t:
        y = x * x
        z = x + 1.0
    g = t.gradient([y, z], x, output_gradients=[tf.constant([3.0, 4.0]), None])
    np.testing.assert_array_equal(g.numpy(), [6.0, 16.0])       # 2x * [3, 4]; z is not seeded


def test_input_signature_converts_a_list_argument():
    f = tf.function(lambda x: tf.reduce_sum(x), input_signature=[tf.TensorSpec([None], tf.float32)])
    assert f([1.0, 2.0, 3.0]).numpy() == 6.0
    assert f(tf.constant([1.0, 2.0])).numpy() == 3.0
    assert f.experimental_get_tracing_count() == 1


@graph_modes
def test_initial_value_reading_another_variable():
    """TF 2 guards such reads: initialized value if there is one, else the initial value."""
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        u = tf.Variable(v * 2.0)
        z = tf.Variable(tf.zeros_like(v))
        w = tf.Variable(u.initialized_value() + 1.0)
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        for got, want in zip(s.run([v, u, z, w]), ([1, 2], [2, 4], [0, 0], [3, 5])):
            np.testing.assert_array_equal(got, want)
        s.run(v.assign([10.0, 20.0]))
        s.run(u.initializer)                      # v is initialized now: its value is used
        np.testing.assert_array_equal(s.run(u), [20.0, 40.0])
    with tf.compat.v1.Session(graph=g) as s:     # fresh session: only u's initializer
        s.run(u.initializer)
        np.testing.assert_array_equal(s.run(u), [2.0, 4.0])
        with pytest.raises(tf.errors.FailedPreconditionError):
            s.run(v)                              # v itself was not initialized


@graph_modes
def test_hessians_of_unconnected_or_linear_inputs_raise_like_tf():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        y = tf.constant(3.0)
        with pytest.raises(ValueError, match="None values not supported"):
            tf.hessians(tf.reduce_sum(x * x), [x, y])          # y unconnected
        with pytest.raises(ValueError, match="None values not supported"):
            tf.hessians(tf.reduce_sum(x * x * y), [x, y])      # linear in y
        (h,) = tf.hessians(tf.reduce_sum(x * x * y), [x])
    with tf.compat.v1.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(h), [[6.0, 0.0], [0.0, 6.0]])


def test_hessians_in_eager_mode_is_a_runtime_error():
    x = tf.constant([1.0, 2.0])
    with pytest.raises(RuntimeError, match="eager execution"):
        tf.hessians(x * x, x)


def test_feed_key_naming_nothing_is_a_type_error():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = x * 2.0
    with tf.compat.v1.Session(graph=g) as s:
        with pytest.raises(TypeError, match="Cannot interpret feed_dict key"):
            s.run(y, {"nope:0": 1.0})
        with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
            s.run("nope:0", {x: 1.0})


def test_equal_python_scalars_share_a_trace():
    @tf.function
    def f(x, s):
        return x * s

    x = tf.constant(2.0)
    assert [f(x, 1).numpy(), f(x, 1.0).numpy(), f(x, True).numpy()] == [2.0, 2.0, 2.0]
    assert f.experimental_get_tracing_count() == 1
    f(x, 1.5)
    assert f.experimental_get_tracing_count() == 2


@pytest.mark.parametrize("bad", [
    lambda: tf.matmul(tf.ones([2]), tf.ones([2])),
    lambda: tf.reduce_sum(tf.ones([2, 2]), axis=2),
    lambda: tf.ones([3])[::0],
], ids=["matmul-rank", "reduce-axis", "slice-step-0"])
def test_eager_argument_errors_are_invalid_argument_but_graph_ones_value_errors(bad):
    with pytest.raises(tf.errors.InvalidArgumentError):
        bad()                                   # eager: the kernel finds it, as in TF
    with tf.Graph().as_default():
        with pytest.raises(ValueError):
            bad()                               # graph construction: ValueError, as in TF


@graph_modes
def test_group_runs_all_its_inputs():
    g = tf.Graph()
    with g.as_default():
        a, b = tf.Variable(1.0), tf.Variable(2.0)
        both = tf.group(a.assign(10.0), b.assign_add(5.0).op, name="both")
        assert isinstance(both, tf.Operation) and both.name == "both"
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=g) as s:
        s.run(init)
        assert s.run(both) is None
        assert s.run([a, b]) == [10.0, 7.0]
    assert tf.group(tf.constant(1.0)) is None          # eager: already ran, as in TF


def _run_compiled_and_interpreted(g, fetches, feed):
    """{mode: results} of one Session run of g in each of jitgrad's two modes."""
    out = {}
    for mode in ("compiled", "interpret"):
        with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
            out[mode] = s.run(fetches, feed)
    return out


def _prod_hessian(x, groups):
    """Hessian of sum over groups of prod(group): d2/dxi dxj = product of the group's
    other elements (i != j in one group), 0 otherwise. groups: lists of flat indices."""
    flat = x.ravel().astype(np.float64)
    h = np.zeros((flat.size, flat.size))
    for grp in groups:
        for i in grp:
            for j in grp:
                if i != j:
                    h[i, j] = np.prod([flat[k] for k in grp if k not in (i, j)])
    return h


@graph_modes
@pytest.mark.parametrize("axis, groups", [(None, [[0, 1, 2, 3, 4, 5]]), (0, [[0, 3], [1, 4], [2, 5]]),
                                          (1, [[0, 1, 2], [3, 4, 5]]), ([1, 0], [[0, 1, 2, 3, 4, 5]])])
def test_reduce_prod_has_second_derivatives(axis, groups):
    """tf.hessians(reduce_prod) raised LookupError (its gradient helper had no gradient)."""
    x0 = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.25]], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3])
        h = tf.hessians(tf.reduce_sum(tf.reduce_prod(x, axis=axis)), x)[0]
    for got in _run_compiled_and_interpreted(g, h, {x: x0}).values():
        np.testing.assert_allclose(got.reshape(6, 6), _prod_hessian(x0, groups), rtol=1e-5, atol=1e-6)


def test_reduce_prod_second_derivative_with_nested_tapes():
    x = tf.Variable([2.0, 3.0, 5.0])
    with tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            y = tf.reduce_prod(x)
        g = inner.gradient(y, x)                  # [15, 10, 6]
        s = tf.reduce_sum(g)
    # d/dx_k of sum_i prod_{j != i} x_j = sum over the two others: [3+5, 2+5, 2+3]
    np.testing.assert_allclose(outer.gradient(s, x).numpy(), [8.0, 7.0, 5.0])


def test_pow_keeps_c_special_values_for_a_scalar_exponent():
    """C99 Annex F (TF's kernel is std::pow): pow(+-0, y) = +0 and pow(-inf, y) = +inf for
    y > 0 not an odd integer; pow(-0, -1) = -inf. numpy's scalar-exponent shortcut (sqrt)
    gave -0 and nan in the interpreter and eagerly, while compiled code gave +0 and +inf."""
    x = np.array([-0.0, 0.0, -np.inf, 4.0], np.float32)
    expected_half = np.array([0.0, 0.0, np.inf, 2.0], np.float32)
    eager = tf.pow(tf.constant(x), 0.5).numpy()
    np.testing.assert_array_equal(eager, expected_half)
    assert not np.signbit(eager).any()
    assert tf.pow(tf.constant(np.float32(-0.0)), -1.0).numpy() == -np.inf
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [4])
        y = tf.pow(p, 0.5)
    for got in _run_compiled_and_interpreted(g, y, {p: x}).values():
        np.testing.assert_array_equal(got, expected_half)
        assert not np.signbit(got).any()


@pytest.mark.parametrize("exponent", [0.5, -1.0, 2.0, 1.0 / 3.0])
def test_float32_pow_interpreter_matches_compiled_bit_for_bit(exponent):
    """Both evaluate float32 pow in float64 and round once (vecmath's documented method),
    so the interpreter and the compiled code agree exactly."""
    x = np.random.default_rng(7).uniform(0.0, 10.0, 300).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, x.shape)
        y = tf.pow(p, exponent)
    runs = list(_run_compiled_and_interpreted(g, y, {p: x}).values())
    np.testing.assert_array_equal(runs[0], runs[1])
    exact = x.astype(np.float64) ** np.float64(np.float32(exponent))      # the float32 constant, widened
    np.testing.assert_array_equal(runs[1], exact.astype(np.float32))


def _signs(a):
    return np.signbit(np.asarray(a)).tolist()


def test_signed_zeros_of_max_min_relu_clip_and_sign_agree_everywhere():
    """TF 2.21's Maximum / Minimum return the second operand on a tie (-0 vs +0) in their packed
    code, which computes every element of a tensor of 8 floats but a tail past the last multiple
    of 8 (its scalar code there returns the first: README "Known differences"); Relu is +0 at -0
    (x > 0 ? x : 0); Sign is `(0 < a) - (a < 0)`, +0 for either zero. Values of x repeated 4
    times (16 floats, packed in TF), checked against TF 2.21 (graph mode; eagerly TF makes the
    Python scalar -0.0 a +0.0 constant). A following division turns a wrong sign into inf of
    the wrong sign."""
    x = np.array([-0.0, 0.0, -1.0, 2.0] * 4, np.float32)
    cases = [  # (fn, expected values, expected sign bits), of x's first 4
        (lambda v: tf.nn.relu(v), [0, 0, 0, 2], [False, False, False, False]),
        (lambda v: tf.nn.relu6(v), [0, 0, 0, 2], [False, False, False, False]),
        (lambda v: tf.maximum(v, 0.0), [0, 0, 0, 2], [False, False, False, False]),
        (lambda v: tf.maximum(0.0, v), [0, 0, 0, 2], [True, False, False, False]),
        (lambda v: tf.minimum(v, -0.0), [0, 0, -1, 0], [True, True, True, True]),
        (lambda v: tf.clip_by_value(v, 0.0, 1.0), [0, 0, 0, 1], [False, False, False, False]),
        (lambda v: tf.sign(v), [0, 0, -1, 1], [False, False, True, False]),
        (lambda v: 1.0 / tf.nn.relu(v), [np.inf, np.inf, np.inf, 0.5], [False, False, False, False]),
    ]
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [16])
        ys = [fn(p) for fn, _, _ in cases]
    results = _run_compiled_and_interpreted(g, ys, {p: x})
    results["eager"] = [fn(tf.constant(x)).numpy() for fn, _, _ in cases]
    for where, got in results.items():
        for (_, values, signs), r in zip(cases, got):
            np.testing.assert_array_equal(r, np.float32(values * 4), err_msg=where)
            assert _signs(r) == signs * 4, (where, r)


def test_maximum_minimum_still_propagate_nan_from_either_side():
    a = tf.constant([np.nan, 1.0, -0.0], tf.float32)
    b = tf.constant([1.0, np.nan, -0.0], tf.float32)
    for r in (tf.maximum(a, b).numpy(), tf.minimum(a, b).numpy(), tf.maximum(b, a).numpy()):
        assert np.isnan(r[:2]).all() and r[2] == 0 and np.signbit(r[2])
    np.testing.assert_array_equal(tf.maximum(tf.constant([3, -4]), tf.constant([2, -1])).numpy(), [3, -1])


def test_relu_gradients_multiply_by_the_mask_as_tf():
    """TF's ReluGrad / Relu6Grad are `gradients * (features > 0).cast<T>()` (and (0 < f < 6)):
    an inf or NaN gradient arriving where the unit is off becomes 0 * inf = NaN, not 0.
    Upstream gradients: inf, nan, inf, nan, inf at features -1, 0, 1, 7, -0."""
    f0 = np.array([-1.0, 0.0, 1.0, 7.0, -0.0], np.float32)
    up = np.array([np.inf, np.nan, np.inf, np.nan, np.inf], np.float32)
    expected = {"relu": [np.nan, np.nan, np.inf, np.nan, np.nan],      # 7 > 0: nan * 1
                "relu6": [np.nan, np.nan, np.inf, np.nan, np.nan]}     # 7 >= 6: nan * 0
    fns = {"relu": tf.nn.relu, "relu6": tf.nn.relu6}
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, [5])
        grads = {k: tf.gradients(fn(p), p, grad_ys=tf.constant(up))[0] for k, fn in fns.items()}
    for mode, got in _run_compiled_and_interpreted(g, grads, {p: f0}).items():
        for k in fns:
            np.testing.assert_array_equal(got[k], np.float32(expected[k]), err_msg=f"{k} {mode}")
    x = tf.Variable(f0)
    for k, fn in fns.items():
        with tf.GradientTape() as t:
            y = fn(x)
        np.testing.assert_array_equal(t.gradient(y, x, output_gradients=tf.constant(up)).numpy(),
                                      np.float32(expected[k]), err_msg=k)
    with tf.GradientTape() as t:         # finite gradients: the usual 0 / 1 mask
        y = tf.nn.relu6(x * 4.0)
    np.testing.assert_array_equal(t.gradient(y, x).numpy(), [0.0, 0.0, 4.0, 0.0, 0.0])


def test_one_hot_takes_8_bit_indices_as_tf():
    """TF's OneHot accepts TI in {uint8, int8, int32, int64}; jitgrad raised TypeError for the
    8-bit ones. The depth may exceed the index type's range: int8 -56 is out of [0, 200)
    (an all-off row), it must not meet a wrapped class 200."""
    idx = tf.constant([-56, 3, 0, 127], tf.int8)
    expected = np.zeros((4, 200), np.float32)
    expected[1, 3] = expected[2, 0] = expected[3, 127] = 1.0
    np.testing.assert_array_equal(tf.one_hot(idx, 200).numpy(), expected)
    u = tf.one_hot(tf.constant([200, 3], tf.uint8), 201, dtype=tf.int32).numpy()
    assert u.sum() == 2 and u[0, 200] == 1 and u[1, 3] == 1
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.int8, [4])
        y = tf.one_hot(p, 200)
    for got in _run_compiled_and_interpreted(g, y, {p: np.int8([-56, 3, 0, 127])}).values():
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(TypeError):
        tf.one_hot(tf.constant([1], tf.int16), 3)


@graph_modes
def test_reduce_prod_second_derivative_with_an_unknown_reduced_dimension():
    x0 = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.25]], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3])
        (gx,) = tf.gradients(tf.reduce_sum(tf.reduce_prod(x, axis=0)), x)
        (ggx,) = tf.gradients(tf.reduce_sum(gx), x)     # sum over j of the hessian's rows
    with tf.compat.v1.Session(graph=g) as s:
        got = s.run(ggx, {x: x0})
    expected = _prod_hessian(x0, [[0, 3], [1, 4], [2, 5]]).sum(axis=0).reshape(2, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_pow_gradient_multiplies_as_tf_so_zero_upstream_meets_inf_as_nan():
    """TF 2.21's _PowGrad: gx = grad * y * pow(x, y - 1), gy = grad * z * log(x) (log_x := 0 for
    x <= 0), plain multiplies. Found by bench/tf_fuzz.py seed 3174: divide_no_nan's gradient
    wrt its denominator is 0 where the numerator is 0, and 0 * pow(0, -1) = 0 * inf is NaN in
    TF; jitgrad used mul_no_nan and gave a finite value. By hand, elementwise at
    (x, y) = (0, 0), (0, -1), (2, 3), (-0, -0), upstream 0 (the divide_no_nan chain) or 3."""
    x0 = np.float32([0.0, 0.0, 2.0, -0.0])
    y0 = np.float32([0.0, -1.0, 3.0, -0.0])
    nan, inf = np.nan, np.inf
    expected = [[nan, nan, 0.0, nan], [0.0, nan, 0.0, 0.0],                  # upstream 0
                [nan, -inf, 3 * 3 * 2.0 ** 2, nan], [0.0, nan, 3 * 8 * np.log(2.0), 0.0]]   # upstream 3
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])
        y = tf.compat.v1.placeholder(tf.float32, [4])
        no_nan_chain = tf.reduce_sum(tf.math.divide_no_nan(tf.zeros([4]), tf.pow(x, y)))
        grads = tf.gradients(no_nan_chain, [x, y]) + tf.gradients(tf.reduce_sum(tf.pow(x, y) * 3.0), [x, y])
    runs = _run_compiled_and_interpreted(g, grads, {x: x0, y: y0})
    xe, ye = tf.constant(x0), tf.constant(y0)
    with tf.GradientTape(persistent=True) as t:
        t.watch([xe, ye])
        l0 = tf.reduce_sum(tf.math.divide_no_nan(tf.zeros([4]), tf.pow(xe, ye)))
        l3 = tf.reduce_sum(tf.pow(xe, ye) * 3.0)
    runs["eager"] = [v.numpy() for v in t.gradient(l0, [xe, ye]) + t.gradient(l3, [xe, ye])]
    for mode, got in runs.items():
        for k in range(4):
            np.testing.assert_allclose(got[k], np.float32(expected[k]), rtol=1e-6, err_msg=f"{mode} {k}")


_RELUS = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, "leaky_relu": lambda x: tf.nn.leaky_relu(x, 0.25)}


@pytest.mark.parametrize("name", sorted(_RELUS))
def test_second_derivative_through_relus_is_zeros_not_none(name):
    """TF's _ReluGradGrad / _Relu6GradGrad / _LeakyReluGradGrad return zeros_like(features) for
    the features, so d/dx of relu's gradient is connected and zero (seeds 1014, 3040 of
    bench/tf_fuzz.py: jitgrad gave None with unconnected_gradients='none'); tf.hessians of a
    sum of relus is the zero matrix. First derivatives by hand: 0/1 masks, alpha below 0."""
    fn = _RELUS[name]
    x0 = np.array([-1.5, 0.0, 2.0, 7.0, np.nan])
    first = {"relu": [0, 0, 1, 1, 0], "relu6": [0, 0, 1, 0, 0], "leaky_relu": [.25, .25, 1, 1, .25]}[name]
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float64, [5])
        (gx,) = tf.gradients(tf.reduce_sum(fn(x)), x)
        (ggx,) = tf.gradients(gx, x, unconnected_gradients="none")
        (h,) = tf.hessians(tf.reduce_sum(fn(x)), x)
    assert ggx is not None
    for mode, (d1, d2, hess) in _run_compiled_and_interpreted(g, [gx, ggx, h], {x: x0}).items():
        np.testing.assert_array_equal(d1, first, err_msg=mode)
        np.testing.assert_array_equal(d2, np.zeros(5), err_msg=mode)
        np.testing.assert_array_equal(hess, np.zeros((5, 5)), err_msg=mode)
    xe = tf.constant(x0)
    with tf.GradientTape() as t2:
        t2.watch(xe)
        with tf.GradientTape() as t1:
            t1.watch(xe)
            y = tf.reduce_sum(fn(xe))
        d1 = t1.gradient(y, xe)
    d2 = t2.gradient(d1, xe, unconnected_gradients="none")
    np.testing.assert_array_equal(d1.numpy(), first)
    np.testing.assert_array_equal(d2.numpy(), np.zeros(5))


def test_leaky_relu_gradient_scales_non_finite_upstream_as_tf_select():
    """TF's LeakyReluGrad selects g (x > 0) or g * alpha: inf stays inf, NaN stays NaN, no 0 * inf."""
    x = tf.constant(np.float32([-1.0, 2.0, -3.0, 4.0]))
    up = np.float32([np.inf, np.inf, np.nan, -np.inf])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.nn.leaky_relu(x, 0.5)
    np.testing.assert_array_equal(t.gradient(y, x, output_gradients=tf.constant(up)).numpy(),
                                  np.float32([np.inf, np.inf, np.nan, -np.inf]))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_unsigned_abs_neg_sign_pow_are_rejected_as_tf(dtype):
    """TF 2.21's op defs of Abs/Neg/Sign/Pow have no unsigned T: graph construction raises
    TypeError, eager execution InvalidArgumentError (both checked against TF 2.21 in bench env,
    numpy-array and tensor inputs alike; found by bench/tf_fuzz.py)."""
    v = np.array([3, 0], dtype)
    builders = {"abs": tf.abs, "neg": tf.negative, "neg_op": lambda x: -x, "sign": tf.sign,
                "pow": lambda x: tf.pow(x, tf.constant(np.array([2, 2], dtype)))}
    for name, fn in builders.items():
        with pytest.raises(tf.errors.InvalidArgumentError):
            fn(tf.constant(v))
        g = tf.Graph()
        with g.as_default(), pytest.raises(TypeError):
            fn(tf.constant(v))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.abs(v)
    with pytest.raises(TypeError):
        tf.function(tf.abs)(tf.constant(v))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16])
def test_squared_difference_of_small_integers_is_rejected_as_tf(dtype):
    """TF registers SquaredDifference for floats, int32, int64: eager InvalidArgumentError, graph
    TypeError; int32 still works ((5 - 2)^2 = 9)."""
    v = tf.constant(np.array([5, 2], dtype))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.math.squared_difference(v, v)
    g = tf.Graph()
    with g.as_default(), pytest.raises(TypeError):
        tf.math.squared_difference(tf.constant(np.array([5, 2], dtype)), tf.constant(np.array([5, 2], dtype)))
    np.testing.assert_array_equal(tf.math.squared_difference(tf.constant([5]), tf.constant([2])).numpy(), [9])


def test_multiply_no_nan_of_two_float_types_is_a_value_error():
    """TF converts y to x's dtype first: a float16 tensor times a float32 tensor is ValueError."""
    for a, b in [(tf.float16, tf.float32), (tf.float32, tf.float16)]:
        with pytest.raises(ValueError):
            tf.math.multiply_no_nan(tf.constant([1.0], a), tf.constant([2.0], b))
    got = tf.math.multiply_no_nan(tf.constant([np.inf, 2.0], tf.float16), 0.5)   # a Python scalar adopts x's dtype
    assert got.dtype == tf.float16
    np.testing.assert_array_equal(got.numpy(), np.float16([np.inf, 1.0]))


def test_eager_ops_on_inf_and_nan_print_no_numpy_warnings():
    """TF's kernels return inf / NaN silently; jitgrad's numpy reference kernels must not
    print RuntimeWarnings (divide by zero, overflow, invalid value) to the user's program."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf((tf.constant(1.0) / 0.0).numpy())
        assert np.isnan((tf.constant(0.0) / 0.0).numpy())
        assert np.isinf((tf.constant(3e38) * 10.0).numpy())
        assert np.isnan(tf.math.floormod(tf.constant(1.0), 0.0).numpy())
        assert np.isinf(tf.pow(tf.constant(0.0), -1.0).numpy())
        tf.cast(tf.constant(np.nan), tf.int32)
