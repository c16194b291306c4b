"""tf.gradients / tf.hessians semantics (TF 2.x behaviour where the seed
documents are silent)."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import session

pytestmark = pytest.mark.usefixtures("graph_mode")

METHODS = [tf.AggregationMethod.ADD_N, tf.AggregationMethod.DEFAULT, tf.AggregationMethod.EXPERIMENTAL_TREE,
           tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N]


def test_returns_list_of_len_xs_summing_over_ys():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = tf.constant(3.0)
        single = tf.gradients(x * y, x)
        assert isinstance(single, list) and len(single) == 1
        both = tf.gradients([x * y, x + y], [x, y, x])
        assert len(both) == 3
        tup = tf.gradients((x * y,), (y,))
        assert isinstance(tup, list) and len(tup) == 1
    v = session(g).run([single, both, tup])
    assert v == [[3.0], [4.0, 3.0, 4.0], [2.0]]


def test_grad_ys_weights_scalars_tensors_and_shapes():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0, 3.0])
        y1 = x * x
        y2 = tf.reduce_sum(x)
        w1 = tf.constant([1.0, 0.0, -1.0])
        ga = tf.gradients([y1, y2], x, grad_ys=[w1, 2.0])
        gb = tf.gradients(y1, x, grad_ys=w1)
        gc = tf.gradients(y1, x, grad_ys=[None])
        gd = tf.gradients([y1, y2], x, grad_ys=[None, tf.constant(0.5)])
        ge = tf.gradients(y1, x, grad_ys=3.0)  # a scalar weight broadcasts over y
        with pytest.raises(ValueError):
            tf.gradients([y1, y2], x, grad_ys=[w1])
        with pytest.raises(ValueError):
            tf.gradients(y1, x, grad_ys=[w1, w1])
        with pytest.raises(ValueError):
            tf.gradients(y1, x, grad_ys=tf.constant([1.0, 2.0]))
        with pytest.raises(TypeError):
            tf.gradients(y1, x, grad_ys=tf.constant([1.0, 2.0, 3.0], tf.float64))
    v = session(g).run([ga, gb, gc, gd, ge])
    np.testing.assert_array_equal(v[0][0], [2 + 2, 0 + 2, -6 + 2])
    np.testing.assert_array_equal(v[1][0], [2, 0, -6])
    np.testing.assert_array_equal(v[2][0], [2, 4, 6])
    np.testing.assert_array_equal(v[3][0], [2.5, 4.5, 6.5])
    np.testing.assert_array_equal(v[4][0], [6, 12, 18])


def test_stop_gradients_partial_derivatives_and_stop_gradient_nodes():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        a = 12 * x
        b = 2 * a
        c = 3 * b
        total = tf.gradients([a + b + c], [a, b, c])
        partial = tf.gradients([a + b + c], [a, b, c], stop_gradients=[a, b, c])
        single_stop = tf.gradients(a + b + c, a, stop_gradients=b)  # a tensor, not a list
        through_x = tf.gradients(a + b + c, x, stop_gradients=[b])  # 12 (a) + 0 (b stopped, so c too)
        # tf.stop_gradient node and stop_gradients together: backprop stops at
        # whichever it meets first.
        s = tf.stop_gradient(b)
        z = a * 1.0 + s * c
        both = tf.gradients(z, [x, a, b], stop_gradients=[c])
        assert both[2] is None  # b only reaches z through the stop_gradient node and the stopped c
        with_c = tf.gradients(z, [c, s], stop_gradients=[c])  # a stopped tensor still gets its own gradient
    v = session(g).run([total, partial, single_stop, through_x, both[:2], with_c])
    assert v[0] == [9.0, 4.0, 1.0]
    assert v[1] == [1.0, 1.0, 1.0]
    assert v[2] == [1.0]
    assert v[3] == [12.0]
    assert v[4] == [12.0, 1.0]
    assert v[5] == [24.0, 72.0]  # dz/dc = s = 24, dz/ds = c = 72


def test_stop_gradient_node_alone_gives_none_or_zero():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 2])
        y = tf.stop_gradient(x * x)
        assert tf.gradients(y, x) == [None]
        (z,) = tf.gradients(y, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        assert z.shape.as_list() == [None, 2] and z.dtype == tf.float32
    np.testing.assert_array_equal(session(g).run(z, {x: np.ones((3, 2))}), np.zeros((3, 2), np.float32))


def test_unconnected_gradients_none_and_zero():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[1.0, 2.0]])
        u = tf.constant([1.0, 2.0, 3.0], tf.float64)
        y = x * 2
        assert tf.gradients(y, [x, u]) [1] is None
        gz = tf.gradients(y, [x, u], unconnected_gradients=tf.UnconnectedGradients.ZERO)
        gs = tf.gradients(y, [u], unconnected_gradients="zero")
        assert gz[1].shape.as_list() == [3] and gz[1].dtype == tf.float64
        with pytest.raises(ValueError):
            tf.gradients(y, x, unconnected_gradients="sometimes")
    v = session(g).run([gz, gs])
    np.testing.assert_array_equal(v[0][0], [[2.0, 2.0]])
    np.testing.assert_array_equal(v[0][1], np.zeros(3))
    assert v[0][1].dtype == np.float64
    np.testing.assert_array_equal(v[1][0], np.zeros(3))


def test_integer_tensors_are_constants():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        i = tf.constant(3)
        y = x * tf.cast(i, tf.float32) + tf.cast(i * i, tf.float32)
        gx, gi = tf.gradients(y, [x, i])
        assert gi is None
        (gz,) = tf.gradients(y, i, unconnected_gradients="zero")
        assert gz.dtype == tf.int32
        assert tf.gradients(tf.cast(x, tf.int32), x) == [None]  # integer y: no gradient, no error
    assert session(g).run([gx, gz]) == [3.0, 0]


def test_gradient_of_gradient_and_hessians():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = x ** 4
        g1 = tf.gradients(y, x)
        g2 = tf.gradients(g1, x)
        g3 = tf.gradients(g2, x)
        h = tf.hessians(y, x)
        v = tf.constant([1.0, 2.0])
        hv = tf.hessians(tf.reduce_sum(v * v * v) + v[0] * v[1], v)
        assert hv[0].shape.as_list() == [2, 2]
        w = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        hw = tf.hessians(tf.reduce_sum(w * w), [w])
        assert hw[0].shape.as_list() == [2, 2, 2, 2]
        with pytest.raises(ValueError, match="None values"):    # as TF: v does not feed that y
            tf.hessians(tf.reduce_sum(w * w), [w, v])
    r = session(g).run([g1, g2, g3, h, hv, hw[0]])
    assert r[0] == [32.0] and r[1] == [48.0] and r[2] == [48.0]
    assert r[3][0] == 48.0
    np.testing.assert_array_equal(r[4][0], [[6.0, 1.0], [1.0, 12.0]])
    np.testing.assert_array_equal(r[5], 2 * np.eye(4).reshape(2, 2, 2, 2))


def test_gate_gradients_and_colocate_accepted():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        y = tf.matmul(tf.reshape(x, [1, 1]), tf.reshape(x * 3, [1, 1]))
        a = tf.compat.v1.gradients(y, x, gate_gradients=True, colocate_gradients_with_ops=True)
        b = tf.gradients(y, x, gate_gradients=False)
    assert session(g).run([a, b]) == [[6.0], [6.0]]


def test_positional_argument_orders_of_tf2_and_compat_v1():
    """TF 2: gradients(ys, xs, grad_ys, name, gate_gradients, aggregation_method, stop_gradients,
    unconnected_gradients) and hessians(ys, xs, gate_gradients, aggregation_method, name);
    compat.v1 keeps colocate_gradients_with_ops 5th and hessians' name 3rd."""
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        a = 3.0 * x
        y = a * x                                   # 3x^2: dy/dx = 6x = 12, with a held: a = 6
        z = tf.constant(5.0)
        tree = tf.AggregationMethod.EXPERIMENTAL_TREE
        (gx,) = tf.gradients(y, x, None, "g2", False, tree, [a])
        (gz,) = tf.gradients(y, z, None, "g3", False, None, None, tf.UnconnectedGradients.ZERO)
        (gv1,) = tf.compat.v1.gradients(y, x, [2.0], "g4", True, False, tree, [a])
        (h,) = tf.hessians(y, x, False, None, "h2")
        (h1,) = tf.compat.v1.hessians(y, x, "h1")
        with pytest.raises(TypeError):
            tf.gradients(y, x, colocate_gradients_with_ops=True)
    names = [op.name for op in g.get_operations()]
    assert gx.op.name.startswith("g2/") and any(n.startswith("h2/") for n in names) and \
        any(n.startswith("h1/") for n in names)
    assert session(g).run([gx, gz, gv1, h, h1]) == [6.0, 0.0, 12.0, 6.0, 6.0]


def _contributions_graph(method):
    # x receives four contributions: two from x*x, one each from x**3 and sin(x)
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(0.7)
        ys = [x * x, x ** 3, tf.sin(x)]
        (gx,) = tf.gradients(ys, x, aggregation_method=method, name="grads")
    return g, gx


@pytest.mark.parametrize("method", METHODS)
def test_aggregation_methods_give_the_same_values(method):
    g, gx = _contributions_graph(method)
    x = np.float32(0.7)
    c = [np.float32(x), np.float32(x), np.float32(3) * x ** np.float32(2), np.cos(x)]
    # left to right in TF's collection order, either as one AddN or as a chain
    expected = ((c[0] + c[1]) + c[2]) + c[3]
    assert session(g).run(gx) == expected


def test_aggregation_schedules_differ_and_are_recorded():
    structures = {}
    for method in METHODS:
        g, gx = _contributions_graph(method)
        addns = [op for op in g.get_operations() if op.type == "AddN"]
        structures[method] = [len(op.inputs) for op in addns]
        # the method reaches the compiler on the sums themselves (and nowhere else)
        want = {0: "ADD_N", 1: "EXPERIMENTAL_TREE", 2: "EXPERIMENTAL_ACCUMULATE_N"}[method]
        assert {op.attrs["_aggregation"] for op in addns} == {want}
        if method in (tf.AggregationMethod.EXPERIMENTAL_TREE, tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
            # a left-to-right chain: each AddN adds the running sum and the next contribution
            assert all(op.name.startswith("grads/Const_gradient_sum/AddN") for op in addns)
            for prev, nxt in zip(addns, addns[1:]):
                assert nxt.inputs[0] is prev.outputs[0]
            assert gx is addns[-1].outputs[0]
        else:
            assert gx is addns[0].outputs[0]
    assert structures[tf.AggregationMethod.ADD_N] == [4]
    assert structures[tf.AggregationMethod.DEFAULT] == [4]
    assert structures[tf.AggregationMethod.EXPERIMENTAL_TREE] == [2, 2, 2]
    assert structures[tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N] == [2, 2, 2]
    assert tf.AggregationMethod.DEFAULT == tf.AggregationMethod.ADD_N
    with tf.Graph().as_default():
        x = tf.constant(1.0)
        with pytest.raises(ValueError):
            tf.gradients(x * x, x, aggregation_method=7)


def test_gradient_names_group_under_name():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0, name="x")
        y = tf.multiply(x, x, name="y")
        (a,) = tf.gradients(y, x)
        (b,) = tf.gradients(y, x, name="my_grads")
        (c,) = tf.gradients(y, x)
    assert a.name.startswith("gradients/")
    assert b.name.startswith("my_grads/")
    assert c.name.startswith("gradients_1/")
    assert any(op.name.startswith("gradients/y_grad/") for op in g.get_operations())
    assert a.name == "gradients/AddN:0"


def test_gradients_in_eager_mode_is_runtime_error():
    x = tf.constant(1.0)
    with pytest.raises(RuntimeError):
        tf.gradients(x * x, x)


def test_gradients_wrt_variables_and_through_placeholders():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable([[1.0], [2.0]])
        x = tf.compat.v1.placeholder(tf.float32, [None, 2])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        gw, gx = tf.gradients(loss, [w, x])
        assert gw.shape.as_list() == [2, 1] and gx.shape.as_list() == [None, 2]
        init = tf.compat.v1.global_variables_initializer()
    s = session(g)
    s.run(init)
    xv = np.array([[1.0, 1.0], [0.0, 1.0]], np.float32)
    r = xv @ np.array([[1.0], [2.0]], np.float32) - 1
    vw, vx = s.run([gw, gx], {x: xv})
    np.testing.assert_allclose(vw, xv.T @ r, rtol=1e-6)
    np.testing.assert_allclose(vx, r @ np.array([[1.0, 2.0]], np.float32), rtol=1e-6)


def test_gradient_errors():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
    with tf.Graph().as_default():
        y = tf.constant(2.0)
        with pytest.raises(ValueError):
            tf.gradients(y * y, x)  # different graphs


def test_grad_ys_seed_y_broadcast_or_unit_dims_never_summed():
    """A grad_y is y's seed: one that broadcasts to y, or differs from it only by unit
    dimensions, gives TF's numbers (d(x*x) = 2x * seed, seed broadcast to y); one with more
    elements than y is refused -- a fed seed [[3, 4], [1, 1]] for y of shape [2] was summed
    down to x's shape (the gradient [8, 20], a wrong number)."""
    x_val = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(x_val)
        row = tf.constant([1.0, 2.0])
        wide = tf.gradients(x * x, x, grad_ys=row)[0]                  # [2] broadcast over [2, 2]
        v = tf.constant([1.0, 2.0, 3.0])
        unit = tf.gradients(v * v, v, grad_ys=tf.constant([[1.0, 2.0, 3.0]]))[0]   # [1, 3] for [3]
        s = tf.constant([1.0, 2.0])
        seed = tf.compat.v1.placeholder(tf.float32)                    # rank known only when fed
        fed = tf.gradients(s * s, s, grad_ys=seed)[0]
        with pytest.raises(ValueError, match="incompatible"):
            tf.gradients(s * s, s, grad_ys=tf.ones([2, 2]))
        with pytest.raises(ValueError, match="incompatible"):
            tf.gradients(s * s, s, grad_ys=tf.compat.v1.placeholder(tf.float32, [None, None]))
    sess = session(g)
    np.testing.assert_array_equal(sess.run(wide), 2 * x_val * np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(sess.run(unit), [2.0, 8.0, 18.0])
    np.testing.assert_array_equal(sess.run(fed, {seed: np.float32(3.0)}), [6.0, 12.0])
    np.testing.assert_array_equal(sess.run(fed, {seed: np.array([3.0, 4.0], np.float32)}), [6.0, 16.0])
    for bad in ([[3.0, 4.0], [1.0, 1.0]], [[3.0], [1.0]], [1.0, 2.0, 3.0]):
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(fed, {seed: np.array(bad, np.float32)})


def test_gradients_of_no_ys_nested_xs_and_complex_ys_without_seed():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, 2.0])
        z = tf.constant([3.0, 4.0])
        assert tf.gradients([], x) == [None]                        # TF: nothing reaches x
        zero = tf.gradients([], [x, z], unconnected_gradients="zero")
        with pytest.raises(TypeError):                              # TF refuses nested xs
            tf.gradients(x * z, [x, [z]])
        c = tf.constant([1 + 2j, 3 - 1j], tf.complex64)
        with pytest.raises(TypeError, match="must set grad_ys"):   # TF: no default seed for complex
            tf.gradients(c * c, c)
        dc = tf.gradients(c * c, c, grad_ys=tf.ones_like(c))[0]
    got = session(g).run([zero, dc])
    np.testing.assert_array_equal(got[0], [[0.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(got[1], np.conj(2 * np.array([1 + 2j, 3 - 1j])))


def test_gradients_inside_branches_and_loop_bodies_wrt_outer_tensors(no_fallback):
    """tf.gradients while a cond branch / loop body / map_fn fn is traced, w.r.t. a tensor of
    the enclosing graph: inside, that tensor is its capture (it raised "not from the same
    graph").  Values by hand: d(x^2) = 2x; the loop adds d(x^2 acc)/dx = 2x acc twice from
    acc = 1 (1 -> 7 -> 49 at x = 3); d(e^2 x)/dx = e^2; d/dx of d(x^3)/dx = 6x."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        z = tf.compat.v1.placeholder(tf.float32, [])
        branch = tf.cond(x > 0, lambda: tf.gradients(x * x, x)[0], lambda: x)
        seen = []

        def unconnected():
            seen.append(tf.gradients(x * x, [x, z])[1])      # z is never captured: None
            return tf.gradients(x * x, z, unconnected_gradients="zero")[0]
        zero = tf.cond(x > 0, unconnected, lambda: x)
        loop = tf.while_loop(lambda i, acc: i < 2, lambda i, acc: (i + 1, acc + tf.gradients(x * x * acc, x)[0]),
                             (0, tf.constant(1.0)))[1]
        mapped = tf.map_fn(lambda e: tf.gradients(e * e * x, x)[0], tf.constant([1.0, 2.0]))
        nested = tf.cond(x > 0, lambda: tf.cond(x > 1, lambda: tf.gradients(x * x * x, x)[0], lambda: x),
                         lambda: x)
        second = tf.gradients(nested, x)[0]
    s = session(g)
    assert s.run(branch, {x: 3.0}) == 6.0 and s.run(branch, {x: -2.0}) == -2.0
    assert seen == [None] and s.run(zero, {x: 3.0, z: 1.0}) == 0.0
    assert s.run(loop, {x: 3.0}) == 49.0
    np.testing.assert_array_equal(s.run(mapped, {x: 3.0}), [1.0, 4.0])
    assert s.run([nested, second], {x: 3.0}) == [27.0, 18.0]


def test_int_loop_counter_target_is_zero_in_a_function_none_in_a_plain_graph(no_fallback):
    """An int output of a while_loop as the target: in a tf.function TF's While op is itself
    between x and the counter, so its gradient runs with zero incoming gradients and x gets
    0.0; in a plain tf.Graph TF's while_loop returns Identities of the outputs and the int
    Identity stops the gradient: None (both as TF 2.21).  y = x^(3+1) = 16 at x = 2, and
    d(i * y)/dx = 3 * 4x^3 = 96; d[y]/dx = 4x^3 = 32."""
    x0 = tf.constant(2.0)

    def loop(x):
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x), [tf.constant(0), x])

    @tf.function
    def taped(x):
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            i, y = loop(x)
            z = tf.cast(i, tf.float32) * y
        return t.gradient(i, x), t.gradient(i, x, unconnected_gradients="zero"), t.gradient(z, x)

    @tf.function
    def symbolic(x):
        i, y = loop(x)
        # y is the While's other output: it reads the zeros the While's gradient was fed (TF)
        return tf.gradients(i, [x, y]) + tf.gradients([i, y], x)

    got = [g.numpy() for g in taped(x0)]
    assert got == [0.0, 0.0, 96.0]
    assert [g.numpy() for g in symbolic(x0)] == [0.0, 0.0, 32.0]

    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        i, y = loop(x)
        assert tf.gradients(i, x) == [None]
        zero = tf.gradients(i, x, unconnected_gradients="zero")
        both = tf.gradients([i, y], x)
        as_int = tf.gradients(tf.cast(x, tf.int32), x)
        assert as_int == [None]
    assert session(g).run([zero, both]) == [[0.0], [32.0]]
    # an int output of tf.cond stops the gradient even in a function (TF's If gradient)
    cond_int = tf.function(lambda x: tf.gradients(
        tf.cond(x > 1.0, lambda: (tf.constant(1), x * 2), lambda: (tf.constant(2), x * 3))[0], x))
    assert cond_int(x0) == [None]
