"""Graph / Operation / Tensor API, tf.constant, placeholders, variables and
dtype rules in graph mode."""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import session

pytestmark = pytest.mark.usefixtures("graph_mode")


def test_tensor_and_operation_basics():
    g = tf.Graph()
    with g.as_default() as entered:
        assert entered is g
        assert tf.compat.v1.get_default_graph() is g and tf.get_default_graph() is g
        assert not tf.executing_eagerly()
        a = tf.constant([[1.0, 2.0]])
        b = a * a
    assert tf.executing_eagerly()
    assert tf.compat.v1.get_default_graph() is not g
    assert b.name == "mul:0" and b.op.name == "mul" and b.op.type == "Mul"
    assert b.graph is g and b.op.graph is g
    assert b.dtype == tf.float32
    assert b.shape == tf.TensorShape([1, 2]) and b.get_shape().as_list() == [1, 2]
    assert b.shape.rank == 2 and b.ndim == 2
    assert list(b.op.inputs) == [a, a] and b.op.outputs[0] is b and b.value_index == 0
    assert a.op.type == "Const" and a.name == "Const:0"
    assert b.op in g.get_operations() and g.get_operations()[0] is a.op
    assert g.get_tensor_by_name("mul:0") is b
    assert g.get_operation_by_name("mul") is b.op
    assert g.as_graph_element("mul:0") is b and g.as_graph_element("mul") is b.op
    with pytest.raises(ValueError):
        g.get_tensor_by_name("mul")
    with pytest.raises(KeyError):
        g.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError):
        g.get_tensor_by_name("mul:1")
    assert "mul:0" in repr(b)
    assert b.consumers() == []
    assert a.consumers() == [b.op]


def test_unique_names_and_name_scopes():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        names = [(x * x).name, (x * x).name, tf.multiply(x, x, name="mul").name, tf.add(x, x, name="total").name,
                 tf.add(x, x, name="total").name]
        assert names == ["mul:0", "mul_1:0", "mul_2:0", "total:0", "total_1:0"]
        with tf.name_scope("layer") as scope:
            assert scope == "layer/"
            y = x + 1.0
            with tf.name_scope("inner"):
                z = y * 2.0
        with tf.name_scope("layer"):
            w = x - 1.0
        with g.name_scope("layer/"):  # re-entering an existing scope
            v = x * 3.0
    assert y.name == "layer/add:0" and y.op.inputs[1].name == "layer/Const:0"
    assert z.name == "layer/inner/mul:0"
    assert w.name == "layer_1/sub:0"
    assert v.name == "layer/mul:0"


def test_operator_overloads_names_and_types():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.0, -2.0, 4.0])
        y = tf.constant([2.0, 2.0, 2.0])
        cases = {
            "add": (x + y, "Add"), "radd": (1.0 + x, "Add"), "sub": (x - y, "Sub"), "rsub": (1.0 - x, "Sub"),
            "mul": (x * y, "Mul"), "rmul": (2 * x, "Mul"), "truediv": (x / y, "RealDiv"),
            "rtruediv": (1.0 / x, "RealDiv"), "floordiv": (x // y, "FloorDiv"), "rfloordiv": (7.0 // x, "FloorDiv"),
            "mod": (x % y, "FloorMod"), "rmod": (7.0 % x, "FloorMod"), "pow": (x ** 2, "Pow"),
            "rpow": (2.0 ** x, "Pow"), "neg": (-x, "Neg"), "abs": (abs(x), "Abs"), "lt": (x < y, "Less"),
            "le": (x <= 1.0, "LessEqual"), "gt": (x > y, "Greater"), "ge": (x >= y, "GreaterEqual"),
            "getitem": (x[1:], "StridedSlice"), "matmul": (tf.reshape(x, [1, 3]) @ tf.reshape(y, [3, 1]), "MatMul"),
            "numpy_left": (np.float32(2.0) * x, "Mul"),
        }
        for k, (t, op_type) in cases.items():
            assert t.op.type in (op_type, op_type + "V2"), k
        assert cases["add"][0].name == "add:0" and cases["neg"][0].name == "Neg:0"
        assert cases["getitem"][0].name == "strided_slice:0"
    v = session(g).run({k: t for k, (t, _) in cases.items()})
    xv, yv = np.array([1.0, -2.0, 4.0], np.float32), np.float32(2.0)
    ref = {"add": xv + yv, "radd": 1 + xv, "sub": xv - yv, "rsub": 1 - xv, "mul": xv * yv, "rmul": 2 * xv,
           "truediv": xv / yv, "rtruediv": 1 / xv, "floordiv": xv // yv, "rfloordiv": 7 // xv, "mod": xv % yv,
           "rmod": np.mod(np.float32(7), xv), "pow": xv ** 2, "rpow": np.float32(2) ** xv, "neg": -xv,
           "abs": np.abs(xv), "lt": xv < yv, "le": xv <= 1, "gt": xv > yv, "ge": xv >= yv, "getitem": xv[1:],
           "matmul": np.array([[2 - 4 + 8]], np.float32), "numpy_left": 2 * xv}
    for k, r in ref.items():
        np.testing.assert_allclose(v[k], r, rtol=1e-6, err_msg=k)
        assert v[k].dtype == np.asarray(r).dtype, k


def test_graph_tensors_hash_and_compare_by_identity():
    with tf.Graph().as_default():
        x = tf.constant(1.0)
        y = tf.constant(1.0)
        assert (x == x) is True and (x == y) is False and (x != y) is True
        d = {x: 1, y: 2}
        assert d[x] == 1 and len({x, y, x}) == 2
        assert x.ref() == x.ref() and x.ref().deref() is x
        with pytest.raises(TypeError):
            bool(x)
        with pytest.raises(TypeError):
            len(x)
        with pytest.raises(TypeError):
            iter(x)
        # elementwise comparison is tf.equal
        assert tf.equal(x, y).dtype == tf.bool


def test_ops_from_different_graphs_do_not_mix():
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default():
        a = tf.constant(1.0)
    with g2.as_default():
        b = tf.constant(2.0)
        with pytest.raises(ValueError):
            a + b
        with pytest.raises(ValueError):
            tf.add(a, 1.0)  # a is not in the default graph


def test_nested_default_graphs():
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default():
        with g2.as_default():
            assert tf.compat.v1.get_default_graph() is g2
            c = tf.constant(1.0)
        assert tf.compat.v1.get_default_graph() is g1
    assert c.graph is g2


# ---------------------------------------------------------------- tf.constant
def test_constant_dtype_inference_and_shape():
    g = tf.Graph()
    with g.as_default():
        cases = {
            "float": (tf.constant(1.5), tf.float32, []),
            "int": (tf.constant(3), tf.int32, []),
            "big_int": (tf.constant(2 ** 40), tf.int64, []),
            "bool": (tf.constant(True), tf.bool, []),
            "list_float": (tf.constant([1.0, 2.0]), tf.float32, [2]),
            "list_mixed": (tf.constant([1, 2.5]), tf.float32, [2]),
            "list_int": (tf.constant([[1, 2], [3, 4]]), tf.int32, [2, 2]),
            "nd_f64": (tf.constant(np.array([1.0, 2.0])), tf.float64, [2]),
            "nd_f32": (tf.constant(np.zeros((2, 3), np.float32)), tf.float32, [2, 3]),
            "nd_i64": (tf.constant(np.arange(3)), tf.int64, [3]),
            "np_scalar": (tf.constant(np.float64(2.0)), tf.float64, []),
            "dtype": (tf.constant(1, dtype=tf.float64), tf.float64, []),
            "dtype_np": (tf.constant([1, 2], dtype=np.float32), tf.float32, [2]),
            "dtype_str": (tf.constant(1.0, dtype="float64"), tf.float64, []),
            "shape_fill": (tf.constant(7.0, shape=[2, 3]), tf.float32, [2, 3]),
            "shape_reshape": (tf.constant([1, 2, 3, 4, 5, 6], shape=(3, 2)), tf.int32, [3, 2]),
            "empty": (tf.constant([]), tf.float32, [0]),
            "named": (tf.constant(1.0, name="c"), tf.float32, []),
        }
        for k, (t, dt, shape) in cases.items():
            assert t.dtype == dt, k
            assert t.shape.as_list() == shape, k
        assert cases["named"][0].name == "c:0"
        with pytest.raises(TypeError):
            tf.constant(1.5, dtype=tf.int32)
        with pytest.raises(TypeError):
            tf.constant([1, 2, 3], shape=[2, 2])
        with pytest.raises(ValueError):
            tf.constant([[1, 2], [3]])
        assert tf.constant("text").dtype == tf.string   # string tensors exist now (as in TF)
    v = session(g).run({k: t for k, (t, _, _) in cases.items()})
    assert v["float"] == np.float32(1.5) and isinstance(v["float"], np.float32)
    assert v["big_int"] == 2 ** 40
    np.testing.assert_array_equal(v["shape_fill"], np.full((2, 3), 7, np.float32))
    np.testing.assert_array_equal(v["shape_reshape"], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(v["list_mixed"], [1.0, 2.5])


def test_dtypes_and_cast():
    assert tf.float32.name == "float32" and tf.float64.as_numpy_dtype is np.float64
    assert tf.int32.is_integer and tf.float64.is_floating and tf.bool.is_bool
    assert tf.as_dtype(np.int64) == tf.int64 and tf.as_dtype("float32") is tf.float32
    assert tf.float32 == np.float32 and tf.float32 != tf.float64
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.9, -1.9])
        outs = [tf.cast(x, tf.int32), tf.cast(x, tf.float64), tf.cast(x, tf.int64), tf.cast(x > 0, tf.float32)]
        assert [o.dtype for o in outs] == [tf.int32, tf.float64, tf.int64, tf.float32]
    v = session(g).run(outs)
    np.testing.assert_array_equal(v[0], [1, -1])
    assert v[1].dtype == np.float64 and v[2].dtype == np.int64
    np.testing.assert_array_equal(v[3], [1.0, 0.0])


# ---------------------------------------------------------------- placeholders
def test_placeholders():
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float32, shape=[None, 3], name="input")
        q = tf.compat.v1.placeholder(tf.int32)
        r = tf.compat.v1.placeholder(tf.float64, shape=())
        d = tf.compat.v1.placeholder_with_default(tf.constant([1.0, 2.0]), shape=[None])
        assert p.name == "input:0" and p.op.type == "Placeholder" and p.shape.as_list() == [None, 3]
        assert q.shape.rank is None and q.dtype == tf.int32
        assert r.shape.as_list() == [] and d.shape.as_list() == [None]
        y = tf.reduce_sum(p, axis=1) * 2.0
        assert y.shape.as_list() == [None]
    s = session(g)
    np.testing.assert_array_equal(s.run(y, {p: np.ones((4, 3))}), np.full(4, 6.0, np.float32))
    np.testing.assert_array_equal(s.run(q * 2, {q: [[1], [2]]}), [[2], [4]])
    np.testing.assert_array_equal(s.run(d), [1.0, 2.0])
    np.testing.assert_array_equal(s.run(d, {d: [5.0, 6.0, 7.0]}), [5.0, 6.0, 7.0])
    with pytest.raises(tf.errors.InvalidArgumentError):
        s.run(y)


def test_placeholder_in_eager_mode_is_an_error():
    with pytest.raises(RuntimeError):
        tf.compat.v1.placeholder(tf.float32)


# ---------------------------------------------------------------- variables
def test_graph_variables_initializer_and_assignments():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0)
        w = tf.Variable([1.0, 2.0], name="w")
        k = tf.Variable(3, trainable=False)
        assert isinstance(v, tf.Variable)
        assert v.name == "Variable:0" and w.name == "w:0" and k.name == "Variable_1:0"
        assert v.dtype == tf.float32 and w.shape.as_list() == [2] and k.dtype == tf.int32
        assert tf.compat.v1.global_variables() == [v, w, k]
        assert tf.compat.v1.trainable_variables() == [v, w]
        y = v * 2.0 + tf.reduce_sum(w) + v ** 2 - w[0] + tf.cast(k, tf.float32)
        a = v.assign(5.0)
        aa = v.assign_add(1.5)
        sub = w.assign_sub([1.0, 1.0])
        ka = k.assign_add(2)
        init = tf.compat.v1.global_variables_initializer()
        assert isinstance(init, tf.Operation)
        gv = tf.gradients(y, [v, w])
    s = session(g)
    with pytest.raises(tf.errors.FailedPreconditionError):
        s.run(v)
    assert s.run(init) is None
    assert s.run(v) == 1.0
    assert s.run(y) == 2 + 3 + 1 - 1 + 3
    r = s.run(gv)
    assert r[0] == 4.0
    np.testing.assert_array_equal(r[1], [0.0, 1.0])
    assert s.run(a) == 5.0 and s.run(v) == 5.0
    assert s.run(aa) == 6.5 and s.run(aa) == 8.0
    np.testing.assert_array_equal(s.run(sub), [0.0, 1.0])
    assert s.run(ka) == 5 and s.run(k) == 5
    # state is per Session: a fresh one starts uninitialised
    s2 = session(g)
    with pytest.raises(tf.errors.FailedPreconditionError):
        s2.run(w)
    s2.run(init)
    np.testing.assert_array_equal(s2.run(w), [1.0, 2.0])
    # feeding a variable overrides its value for that run only
    assert s.run(v * 1.0, {v: 3.0}) == 3.0 and s.run(v) == 8.0


def test_variable_assign_dtype_and_shape_errors():
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0])
        with pytest.raises((TypeError, ValueError)):
            v.assign([1.0, 2.0, 3.0])
        with pytest.raises((TypeError, ValueError)):
            v.assign(tf.constant([1.0, 2.0], tf.float64))


def test_variable_descent_loop_with_assign_sub():
    # the eager minimum search of document 004, written TF1-style with a graph variable
    g = tf.Graph()
    with g.as_default():
        x = tf.Variable(0.1)
        y = 2 * ((x - 2) ** 2) + 3
        (gx,) = tf.gradients(y, x)
        step = x.assign_sub(0.1 * gx)
        init = tf.compat.v1.global_variables_initializer()
    s = session(g)
    s.run(init)
    for _ in range(50):
        s.run(step)
    assert f"{s.run(x)}" == "1.9999998807907104"


def test_control_dependencies_and_no_op():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(0)
        inc = v.assign_add(1)
        with tf.control_dependencies([inc]):
            noop = tf.no_op()
            read = tf.identity(v)  # noqa: F841
        init = tf.compat.v1.global_variables_initializer()
    s = session(g)
    s.run(init)
    s.run(noop)
    s.run(noop)
    assert s.run(v) == 2


def test_compat_v1_is_an_importable_tf1_namespace():
    import importlib
    v1 = importlib.import_module("jitgrad.compat.v1")
    assert v1 is tf.compat.v1
    for name in ("float32", "nn", "math", "reduce_sum", "matmul", "add_n", "Tensor", "errors", "placeholder",
                 "Session", "gradients", "global_variables_initializer"):
        assert hasattr(v1, name), name
    g = v1.Graph()
    with g.as_default():
        x = v1.placeholder(v1.float32, [None])
        y = v1.reduce_sum(v1.nn.relu(x) ** 2)
        grad = v1.gradients(y, x)
    with v1.Session(graph=g) as sess:
        got = sess.run(grad, {x: [-1.0, 2.0]})
    np.testing.assert_array_equal(got[0], [0.0, 4.0])
