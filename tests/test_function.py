"""jitgrad.function: tracing, retracing, variables, GradientTape inside, training step."""
import numpy as np
import pytest

import jitgrad as tf


def test_traces_once_per_signature():
    calls = []

    @tf.function
    def f(x, scale=2.0):
        calls.append(1)
        return x * scale + 1.0

    a = f(tf.constant([1.0, 2.0]))
    assert isinstance(a, tf.EagerTensor) and a.numpy().tolist() == [3.0, 5.0]
    f(tf.constant([3.0, 4.0]))
    assert f.experimental_get_tracing_count() == 1
    f(tf.constant([1.0, 2.0, 3.0]))            # new shape
    f(tf.constant([1.0, 2.0], tf.float64))     # new dtype
    f(tf.constant([1.0, 2.0]), scale=3.0)      # new Python value
    f(tf.constant([1.0, 2.0]), scale=3.0)
    assert f.experimental_get_tracing_count() == 4 == len(calls)
    assert f(np.array([1.0], np.float32)).numpy().tolist() == [3.0]


def test_input_signature_and_decorator_with_args():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)], jit_compile=True)
    def f(x):
        return tf.reduce_sum(x * x)

    assert float(f(tf.constant([1.0, 2.0]))) == 5.0
    assert float(f(tf.constant([1.0, 2.0, 3.0]))) == 14.0
    assert f.experimental_get_tracing_count() == 1
    with pytest.raises(TypeError):
        f(tf.constant([[1.0]]))
    assert repr(tf.TensorSpec([None, 2])) == "TensorSpec(shape=(None, 2), dtype=tf.float32, name=None)"


def test_structured_outputs():
    @tf.function
    def f(x):
        return {"a": x + 1.0, "b": [x * 2.0, (x,)], "c": None, "d": 3}

    out = f(tf.constant(1.0))
    assert float(out["a"]) == 2.0 and float(out["b"][0]) == 2.0 and float(out["b"][1][0]) == 1.0
    assert out["c"] is None and out["d"] == 3


def test_captured_variables_read_and_assign():
    v = tf.Variable(1.0)

    @tf.function
    def f(x):
        before = v + 0.0
        v.assign_add(x)
        after = v * 1.0
        return before, after

    b, a = f(tf.constant(2.0))
    assert (float(b), float(a), float(v)) == (1.0, 3.0, 3.0)
    b, a = f(tf.constant(2.0))
    assert (float(b), float(a), float(v)) == (3.0, 5.0, 5.0)
    assert f.experimental_get_tracing_count() == 1
    v.assign(0.0)  # eager writes are seen by the traced graph
    assert float(f(tf.constant(1.0))[1]) == 1.0


def test_gradient_tape_inside_function():
    x0 = tf.Variable(0.1)

    @tf.function
    def step():
        with tf.GradientTape() as t:
            y = 2 * ((x0 - 2) ** 2) + 3
        g = t.gradient(y, x0)
        x0.assign_sub(0.1 * g)
        return g

    for _ in range(50):
        step()
    assert f"{x0.numpy()}" == "1.9999998807907104"
    assert step.experimental_get_tracing_count() == 1


def test_tape_inside_function_watch_and_unconnected():
    @tf.function
    def f(x, z):
        with tf.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x * x
        return t.gradient(y, x), t.gradient(y, z), t.gradient(y, z, unconnected_gradients="zero")

    g, gz, gz0 = f(tf.constant(3.0), tf.constant(1.0))
    assert float(g) == 6.0 and gz is None and float(gz0) == 0.0


def _mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    return [tf.Variable(rng.standard_normal((8, 16)).astype(np.float32) * 0.3),
            tf.Variable(np.zeros(16, np.float32)),
            tf.Variable(rng.standard_normal((16, 4)).astype(np.float32) * 0.3),
            tf.Variable(np.zeros(4, np.float32))]


def _train_step(params, x, y, lr=0.1):
    W1, b1, W2, b2 = params
    with tf.GradientTape() as t:
        h = tf.nn.relu(tf.matmul(x, W1) + b1)
        logits = tf.matmul(h, W2) + b2
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    grads = t.gradient(loss, params)
    for p, g in zip(params, grads):
        p.assign_sub(lr * g)
    return loss


def test_mlp_training_step_function_matches_eager():
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((32, 8)).astype(np.float32))
    y = tf.constant(np.eye(4, dtype=np.float32)[rng.integers(0, 4, 32)])
    pe, pf = _mlp_params(), _mlp_params()
    step = tf.function(lambda x, y: _train_step(pf, x, y))
    le = [float(_train_step(pe, x, y)) for _ in range(5)]
    lf = [float(step(x, y)) for _ in range(5)]
    assert step.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(lf, le, rtol=1e-5)
    assert le[-1] < le[0]
    for a, b in zip(pe, pf):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_nested_function_calls_inline_and_methods():
    @tf.function
    def inner(x):
        return x * 2.0

    class M:
        def __init__(self):
            self.v = tf.Variable(3.0)

        @tf.function
        def __call__(self, x):
            return inner(x) + self.v

    m = M()
    assert float(m(tf.constant(1.0))) == 5.0
    assert float(m(tf.constant(2.0))) == 7.0
    assert inner.experimental_get_tracing_count() == 0  # traced inline into the outer graph


def test_repeated_updates_in_one_call():
    v = tf.Variable([1.0, 1.0])

    @tf.function
    def f():
        v.assign_add([1.0, 2.0])
        v.assign_sub([0.5, 0.5])
        r = v * 2.0
        v.assign(r)
        v.assign_add([1.0, 1.0])
        return r

    r = f()
    assert r.numpy().tolist() == [3.0, 5.0] and v.numpy().tolist() == [4.0, 6.0]


# ---- a GradientTape outside a function sees its ops; Python results become tensors
def test_outer_tape_differentiates_through_function_call():
    @tf.function
    def f(x):
        return x * x

    x = tf.constant(3.0)
    with tf.GradientTape() as t:
        t.watch(x)
        y = f(x)
    assert float(t.gradient(y, x)) == 6.0


def test_outer_tape_sees_captured_variable_in_function():
    v = tf.Variable(2.0)

    @tf.function
    def g():
        return v * v * 3

    with tf.GradientTape() as t:
        y = g()
    assert float(t.gradient(y, v)) == 12.0
    assert float(g()) == 12.0  # and the traced path gives the same value


def test_python_results_are_returned_as_tensors():
    @tf.function
    def const(x):
        return 3.0

    @tf.function
    def square_plus_one(x):
        return x * x + 1

    out = const(tf.constant(1.0))
    assert isinstance(out, tf.EagerTensor) and float(out) == 3.0
    out = square_plus_one(3.0)  # Python argument: traced by value
    assert isinstance(out, tf.EagerTensor) and float(out) == 10.0


def test_get_concrete_function_from_tensor_specs():
    @tf.function
    def double(x):
        return x * 2

    cf = double.get_concrete_function(tf.TensorSpec([None], tf.float32))
    np.testing.assert_array_equal(cf(tf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])


def test_training_step_compiles_once_and_hits_the_cache_after():
    tf.set_default_mode("compiled")  # restored by conftest
    tf.clear_cache()
    rng = np.random.default_rng(0)
    W = tf.Variable(np.full((4, 3), 0.1, np.float32))
    b = tf.Variable(np.zeros(3, np.float32))

    @tf.function
    def train(x, y):
        with tf.GradientTape() as t:
            logits = tf.matmul(x, W) + b
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        gW, gb = t.gradient(loss, [W, b])
        W.assign_sub(0.1 * gW)
        b.assign_sub(0.1 * gb)
        return loss

    x = tf.constant(rng.standard_normal((8, 4)).astype(np.float32))
    y = tf.constant(np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1, 2, 0, 1]])
    losses = [float(train(x, y))]
    after_first = tf.cache_info()
    for _ in range(5):
        losses.append(float(train(x, y)))
    info = tf.cache_info()
    assert train.experimental_get_tracing_count() == 1
    assert info["compiles"] == after_first["compiles"] and info["fallbacks"] == 0
    assert info["plan_hits"] + info["memory_hits"] >= after_first["plan_hits"] + after_first["memory_hits"] + 5
    assert losses[-1] < losses[0]  # the variables really were updated in place


# ---------------------------------------------------------------- variables created while tracing
class _Dense:
    """The usual lazily built layer: its variables are created on the first call."""

    def __init__(self, units):
        self.units, self.w, self.b = units, None, None

    @tf.function
    def __call__(self, x):
        if self.w is None:
            rng = np.random.default_rng(0)
            self.w = tf.Variable(rng.standard_normal((x.shape[-1], self.units)).astype(np.float32), name="w")
            self.b = tf.Variable(tf.zeros([self.units]) + 0.5, name="b")     # traced initializer, lifted
        return tf.nn.relu(tf.matmul(x, self.w) + self.b)


def test_variables_created_on_first_trace_are_lifted_and_captured():
    layer = _Dense(3)
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    y = layer(tf.constant(x))
    assert isinstance(layer.w, tf.Variable) and layer.b.numpy().tolist() == [0.5] * 3
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ layer.w.numpy() + 0.5, 0), rtol=1e-6)
    # the function reads the variable's current value on every call (captured, not baked in)
    layer.b.assign([1.0, 2.0, 3.0])
    np.testing.assert_allclose(layer(tf.constant(x)).numpy(), np.maximum(x @ layer.w.numpy() + [1, 2, 3], 0),
                               rtol=1e-6)
    # as TF: the first call traces twice (create the variables, then use them)
    assert layer.__call__.experimental_get_tracing_count() == 2
    # a new input shape retraces once; the guarded creation does not run again
    layer(tf.constant(x[:1]))
    assert layer.__call__.experimental_get_tracing_count() == 3
    # a gradient tape outside the function sees the created variables
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(tf.constant(x)))
    gw, gb = tape.gradient(loss, [layer.w, layer.b])
    mask = (x @ layer.w.numpy() + [1, 2, 3] > 0).astype(np.float32)
    np.testing.assert_allclose(gb.numpy(), mask.sum(0), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), x.T @ mask, rtol=1e-6)


def test_training_step_creating_its_state_on_first_call():
    state = {}

    @tf.function
    def step(x):
        if "v" not in state:
            state["v"] = tf.Variable(tf.ones([2]), name="v")
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(state["v"] * x - 1.0))
        g = tape.gradient(loss, state["v"])
        state["v"].assign_sub(0.1 * g)
        return loss

    x = tf.constant([1.0, 2.0])
    v = np.ones(2, np.float32)
    for _ in range(3):
        loss = step(x).numpy()
        expected = np.sum(np.square(v * x.numpy() - 1.0))
        v = v - np.float32(0.1) * 2 * (v * x.numpy() - 1.0) * x.numpy()
        np.testing.assert_allclose(loss, expected, rtol=1e-6)
    np.testing.assert_allclose(state["v"].numpy(), v, rtol=1e-6)


def test_variable_creation_on_every_call_is_an_error():
    """TF traces twice on the first call; a function that creates a variable every
    time it runs fails on the second trace."""
    @tf.function
    def f(x):
        v = tf.Variable(1.0)
        return v * x

    with pytest.raises(ValueError, match="singleton tf.Variables created on the first call"):
        f(tf.constant(2.0))


def test_variable_creation_on_a_later_trace_is_an_error():
    made = []

    @tf.function
    def f(x):
        if x.shape.rank == 1 and not made:       # only when traced for a vector
            made.append(tf.Variable(1.0))
        return x * 2.0

    assert f(tf.constant(2.0)).numpy() == 4.0
    with pytest.raises(ValueError, match="singleton tf.Variables created on the first call"):
        f(tf.constant([2.0]))


def test_variable_initial_value_from_arguments_is_a_clear_error():
    @tf.function
    def f(x):
        return tf.Variable(x * 2.0) * 1.0

    with pytest.raises(ValueError, match="depends on the function's arguments"):
        f(tf.constant(1.0))


def test_init_scope_runs_eagerly_inside_a_trace():
    seen = []

    @tf.function
    def f(x):
        with tf.init_scope():
            seen.append(tf.executing_eagerly())
        seen.append(tf.executing_eagerly())
        return x + 1.0

    assert f(tf.constant(1.0)).numpy() == 2.0
    assert seen == [True, False]


def test_dict_arguments_in_either_key_order_feed_the_right_placeholders():
    """Regression: the trace key sorted dict keys but the call fed values in insertion
    order, so the second call reused the first trace with a and b swapped (9.0, then -9.0)."""
    @tf.function
    def f(d):
        return d["a"] - d["b"]

    a, b = tf.constant(5.0), tf.constant(-4.0)
    assert float(f({"b": b, "a": a})) == 9.0
    assert float(f({"a": a, "b": b})) == 9.0
    assert f.experimental_get_tracing_count() == 1      # TF: key order is not part of the signature
    # nested, keyword and returned structures too; a returned dict keeps its own key order
    g = tf.function(lambda x, opts: {"z": opts["p"][1] * x, "y": opts["q"] - x})
    out = g(tf.constant(2.0), opts={"q": tf.constant(10.0), "p": (tf.constant(0.0), tf.constant(3.0))})
    assert list(out) == ["z", "y"] and float(out["z"]) == 6.0 and float(out["y"]) == 8.0
    out = g(tf.constant(2.0), opts={"p": (tf.constant(0.0), tf.constant(3.0)), "q": tf.constant(10.0)})
    assert float(out["z"]) == 6.0 and float(out["y"]) == 8.0


def test_numpy_scalars_are_traced_as_tensors_by_dtype():
    """TF traces numpy scalars as tensors (dtype and shape, not value). Keyed by value,
    np.float32(3.0) == np.int64(3) reused the int64 trace: an int64 result for a float input."""
    @tf.function
    def double(k):
        return k * 2

    got = [double(np.int64(3)), double(np.float32(3.0)), double(np.float64(3.0))]
    assert [r.dtype for r in got] == [tf.int64, tf.float32, tf.float64]
    assert [float(r) for r in got] == [6.0, 6.0, 6.0]
    before = double.experimental_get_tracing_count()
    assert float(double(np.float32(3.5))) == 7.0                   # same dtype: no new trace
    assert double.experimental_get_tracing_count() == before
