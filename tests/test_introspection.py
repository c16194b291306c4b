"""Graph and function introspection (issue 17, item 3): tf.range with a
run-time limit, Graph.as_graph_def(), graph tensors' str(), concrete
functions and their printed signatures, tracing counts, reduce_retracing.
Expected texts are TF 2.21's output for the same programs."""
import numpy as np
import pytest

import jitgrad as tf


# ---------------------------------------------------------------- tf.range at run time
def test_range_with_runtime_limit(graph_mode):
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        r = tf.range(n)
        s = tf.reduce_sum(tf.cast(r, tf.float32) * 2.0)
        rf = tf.range(1.0, n, 0.5)                 # int limit cast to the float dtype, as TF
        rd = tf.range(n, 0, -2)
        assert r.shape.as_list() == [None] and rf.dtype == tf.float32
    before = tf.cache_info()["fallbacks"]
    with tf.compat.v1.Session(graph=g) as sess:
        for k in (4, 7):
            vr, vs, vf, vd = sess.run([r, s, rf, rd], {n: k})
            np.testing.assert_array_equal(vr, np.arange(k, dtype=np.int32))
            assert vs == 2.0 * sum(range(k))
            np.testing.assert_array_equal(vf, np.arange(1.0, k, 0.5, dtype=np.float32))
            np.testing.assert_array_equal(vd, np.arange(k, 0, -2, dtype=np.int32))
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(r, {n: -1})
    if graph_mode == "compiled":   # compiled per length (shape_specialise.py), no interpreter fallback
        assert tf.cache_info()["fallbacks"] == before


def test_range_in_function_traces_once():
    @tf.function
    def f(n):
        return tf.reduce_sum(tf.range(n))
    assert int(f(tf.constant(5))) == 10
    assert int(f(tf.constant(10))) == 45
    assert f.experimental_get_tracing_count() == 1


def test_range_static_cases_stay_constant():
    g = tf.Graph()
    with g.as_default():
        r = tf.range(tf.constant(3))
        assert r.op.type == "Const" and r.shape.as_list() == [3]


# ---------------------------------------------------------------- graphs
def test_graph_tensor_str_and_repr():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
    assert str(x) == 'Tensor("x:0", shape=(2,), dtype=float32)'
    assert repr(x) == "<tf.Tensor 'x:0' shape=(2,) dtype=float32>"


def test_as_graph_def():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        parts = tf.unstack(a, name="u")
        with tf.control_dependencies([a]):
            c = tf.add(parts[1], parts[0], name="c")
    gd = g.as_graph_def()
    rows = [(n.name, n.op, list(n.input)) for n in gd.node]
    assert rows == [("a", "Const", []), ("u", "Unpack", ["a"]), ("c", "AddV2", ["u:1", "u", "^a"])]
    assert len(gd.node) == 3 and c.op.name == "c"
    assert 'node {\n  name: "c"\n  op: "AddV2"\n  input: "u:1"\n  input: "u"\n  input: "^a"\n}\n' in str(gd)


# ---------------------------------------------------------------- functions
def test_pretty_printed_concrete_signatures():
    @tf.function
    def f(x, y=2, *, z=None):
        return x + y, {"a": x}
    f(tf.constant(1.0), 3)
    f(tf.constant([1.0, 2.0]), tf.constant([2.0, 3.0]))
    assert f.pretty_printed_concrete_signatures() == """Input Parameters:
  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tf.float32, name=None)
  y (POSITIONAL_OR_KEYWORD): Literal[3]
  z (KEYWORD_ONLY): Literal[None]
Output Type:
  Tuple[TensorSpec(shape=(), dtype=tf.float32, name=None), Dict[['a', TensorSpec(shape=(), dtype=tf.float32, name=None)]]]
Captures:
  None

Input Parameters:
  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(2,), dtype=tf.float32, name=None)
  y (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(2,), dtype=tf.float32, name=None)
  z (KEYWORD_ONLY): Literal[None]
Output Type:
  Tuple[TensorSpec(shape=(2,), dtype=tf.float32, name=None), Dict[['a', TensorSpec(shape=(2,), dtype=tf.float32, name=None)]]]
Captures:
  None"""
    assert f.experimental_get_tracing_count() == 2


def test_signature_of_varargs_containers_and_none():
    @tf.function
    def g(*args, **kw):
        return [args[0]], 3
    g(tf.constant(1.0), tf.constant(2.0), k=tf.constant(1))
    assert g.pretty_printed_concrete_signatures() == """Input Parameters:
  args_0 (POSITIONAL_ONLY): TensorSpec(shape=(), dtype=tf.float32, name=None)
  args_1 (POSITIONAL_ONLY): TensorSpec(shape=(), dtype=tf.float32, name=None)
  k (KEYWORD_ONLY): TensorSpec(shape=(), dtype=tf.int32, name=None)
Output Type:
  Tuple[List[TensorSpec(shape=(), dtype=tf.float32, name=None)], TensorSpec(shape=(), dtype=tf.int32, name=None)]
Captures:
  None"""
    names = [op.name for op in g.get_concrete_function(tf.constant(1.0), tf.constant(2.0), k=tf.constant(1))
             .graph.get_operations() if op.type == "Placeholder"]
    assert names == ["args_0", "args_1", "k"]

    @tf.function
    def h(xs, d):
        return None
    h([tf.constant(1.0), 2], {"b": tf.constant([1, 2]), "a": "hi"})
    assert h.pretty_printed_concrete_signatures() == """Input Parameters:
  xs (POSITIONAL_OR_KEYWORD): List[TensorSpec(shape=(), dtype=tf.float32, name=None), Literal[2]]
  d (POSITIONAL_OR_KEYWORD): Dict[['b', TensorSpec(shape=(2,), dtype=tf.int32, name=None)], ['a', Literal['hi']]]
Output Type:
  Literal[None]
Captures:
  None"""


def test_concrete_function_with_input_signature_and_capture():
    v = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="inp")])
    def g(x):
        return x * v
    text = g.pretty_printed_concrete_signatures()   # shown before any call, as TF
    assert text.startswith("""Input Parameters:
  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(None,), dtype=tf.float32, name='inp')
Output Type:
  TensorSpec(shape=(None,), dtype=tf.float32, name=None)
Captures:
  """) and text.endswith(": TensorSpec(shape=(), dtype=tf.resource, name=None)")
    c = g.get_concrete_function()
    assert repr(c).startswith("<ConcreteFunction (x: TensorSpec(shape=(None,), dtype=tf.float32, name='inp')) -> "
                              "TensorSpec(shape=(None,), dtype=tf.float32, name=None) at 0x")
    assert str(c).startswith("ConcreteFunction Input Parameters:\n")
    assert c.structured_input_signature == ((tf.TensorSpec([None], tf.float32, name="inp"),), {})
    assert [t.name for t in c.inputs] == ["inp:0"]
    assert str(c.structured_outputs) == str(c.outputs[0])
    assert c.outputs[0].shape.as_list() == [None]
    np.testing.assert_array_equal(c(tf.constant([1.0, 3.0])).numpy(), [2.0, 6.0])
    assert "Placeholder" in [n.op for n in c.graph.as_graph_def().node]


def test_get_concrete_function_with_specs():
    @tf.function
    def f(x):
        return tf.reduce_sum(x)
    c = f.get_concrete_function(tf.TensorSpec([None, 2], tf.float32))
    assert c.inputs[0].shape.as_list() == [None, 2] and c.inputs[0].name == "x:0"
    assert float(c(tf.ones([3, 2]))) == 6.0


def test_reduce_retracing_relaxes_shapes():
    @tf.function(reduce_retracing=True)
    def r(x):
        return tf.shape(x)
    for s in [(2,), (3,), (4,), (2, 3), (4, 5), (1, 1, 1)]:
        np.testing.assert_array_equal(r(tf.zeros(s)).numpy(), s)
    assert r.experimental_get_tracing_count() == 3   # (2,), then (None,), then unknown rank: TF's count
    specs = [line for line in r.pretty_printed_concrete_signatures().splitlines() if line.startswith("  x")]
    assert specs == ["  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(2,), dtype=tf.float32, name=None)",
                     "  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(None,), dtype=tf.float32, name=None)",
                     "  x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=<unknown>, dtype=tf.float32, name=None)"]


def test_without_reduce_retracing_every_shape_traces():
    @tf.function
    def r(x):
        return x * 2
    for n in (1, 2, 3):
        r(tf.zeros([n]))
    assert r.experimental_get_tracing_count() == 3


def test_reduce_retracing_keeps_python_values_and_dtypes_apart():
    @tf.function(reduce_retracing=True)
    def r(x, k):
        return x * k
    r(tf.zeros([2]), 1)
    r(tf.zeros([3]), 1)          # relaxed
    r(tf.zeros([4]), 1)          # reuses the relaxed trace
    assert r.experimental_get_tracing_count() == 2
    np.testing.assert_array_equal(r(tf.ones([2]), 3).numpy(), [3.0, 3.0])   # a new Python value: a new trace
    np.testing.assert_array_equal(r(tf.ones([2], tf.float64), 1).numpy(), [1.0, 1.0])
    assert r.experimental_get_tracing_count() == 4


def test_concrete_function_from_specs_serves_later_calls():
    @tf.function
    def f(x, scale, *, bias):
        return tf.reduce_sum(x) * scale + bias
    c = f.get_concrete_function(tf.TensorSpec([None], tf.float32), 2.0, bias=tf.TensorSpec([], tf.float32))
    assert [t.shape.as_list() for t in c.inputs] == [[None], []]
    assert [t.name for t in c.inputs] == ["x:0", "bias:0"]
    assert f.experimental_get_tracing_count() == 1
    assert float(f(tf.ones([3]), 2.0, bias=tf.constant(1.0))) == 7.0     # TF's dispatch: the [None] trace serves
    assert float(f(tf.ones([5]), 2.0, bias=tf.constant(0.0))) == 10.0
    assert f.experimental_get_tracing_count() == 1
    assert float(f(tf.ones([2]), 3.0, bias=tf.constant(0.0))) == 6.0      # another Python value: a new trace
    assert f.experimental_get_tracing_count() == 2
    assert f.get_concrete_function(tf.TensorSpec([None], tf.float32), 2.0, bias=tf.TensorSpec([], tf.float32)) is c


def test_experimental_relax_shapes_is_reduce_retracing():
    @tf.function(experimental_relax_shapes=True)
    def r(x):
        return x + 1
    for n in (1, 2, 3, 4):
        r(tf.zeros([n]))
    assert r.experimental_get_tracing_count() == 2


def test_concrete_function_call_checks_and_unknown_rank_text():
    @tf.function
    def double(a):
        return a + a
    c = double.get_concrete_function(tf.constant("a"))
    assert c.structured_input_signature == ((tf.TensorSpec([], tf.string, name="a"),), {})
    assert double(tf.constant("a")).numpy() == b"aa" and c(a=tf.constant("b")).numpy() == b"bb"
    with pytest.raises(tf.errors.InvalidArgumentError):   # TF 2.21 raises this too
        c(tf.constant(1))
    u = double.get_concrete_function(tf.TensorSpec(shape=None, dtype=tf.string))
    assert str(u.inputs[0]) == 'Tensor("a:0", dtype=string)'    # TF omits an unknown shape
