"""AutoGraph gaps from TF's AutoGraph reference ("limitations.md") and the
tf.function guide's "Loops" section: object attributes and fixed-structure
collection items modified in staged loops/branches are loop state (TF's
composite symbols), growing a Python list inside a staged loop is TF's
"out of scope" InaccessibleTensorError (a ValueError), lambdas are converted with their function, `return`
inside a staged loop is TF's NotImplementedError, and a Keras `call` with
Python control flow on tensors is converted inside `fit`'s traced step.
Expected values are hand-computed or computed with numpy."""
import numpy as np
import pytest

import jitgrad as tf


class _Box:
    pass


# ---------------------------------------------------------------- composite symbols
def test_attribute_modified_in_staged_for_loop_is_loop_state():
    @tf.function
    def f(x, n):
        c = _Box()
        c.total = tf.constant(0.)
        for _ in tf.range(n):          # n is a tensor: a staged loop
            c.total += x
        return c.total

    assert f(tf.constant(2.), tf.constant(3)).numpy() == 6.0      # 2 + 2 + 2
    assert f(tf.constant(2.5), tf.constant(0)).numpy() == 0.0


def test_static_dict_and_list_items_modified_in_staged_while_loop():
    # limitations.md: static_dict['field'] -= 1 / static_list[0] -= 1 are fine in a TF loop
    @tf.function
    def f(x):
        d = {"field": x}
        lst = [tf.constant(0)]
        while d["field"] > 0:
            d["field"] -= 1
            lst[0] += 2
        return d["field"], lst[0]

    field, count = f(tf.constant(4))
    assert field.numpy() == 0 and count.numpy() == 8           # 4 iterations, +2 each


def test_attribute_assigned_in_staged_if():
    @tf.function
    def f(x):
        c = _Box()
        c.y = tf.constant(0.)
        if x > 0:
            c.y = x * 2.
        else:
            c.y = -x
        return c.y

    assert f(tf.constant(3.)).numpy() == 6.0
    assert f(tf.constant(-4.)).numpy() == 4.0


def test_attribute_loop_state_on_self_in_a_method():
    class Counter:
        def __init__(self):
            self.count = tf.constant(0)

        @tf.function
        def run(self, n):
            for i in tf.range(n):
                self.count += i
            return self.count

    assert Counter().run(tf.constant(5)).numpy() == 0 + 1 + 2 + 3 + 4


def test_attribute_must_be_defined_before_the_loop_reads_it():
    @tf.function
    def f(n):
        c = _Box()
        for _ in tf.range(n):
            c.v += 1
        return c.v

    # TF 2.21: ValueError "'c.v' must be defined before the loop" (+ a note on the dry run's TypeError)
    with pytest.raises(ValueError, match="'c.v' must be defined before the loop"):
        f(tf.constant(2))


def test_attribute_first_assigned_in_the_loop_is_defined_from_one_iteration():
    @tf.function
    def g(n):
        c = _Box()
        for i in tf.range(n):
            c.v = i * 2
        return c.v

    assert g(tf.constant(3)).numpy() == 4          # TF 2.21 gives 4 too: the last iteration's 2 * 2


# ---------------------------------------------------------------- Python lists
def test_list_append_in_staged_loop_is_out_of_scope_type_error():
    # limitations.md: `l.append(i)` inside `for i in tf.range(10)` -> illegal tensor capture
    @tf.function
    def f(n):
        out = []
        for i in tf.range(n):
            out.append(i)
        return out

    with pytest.raises(ValueError, match="out of scope") as info:   # TF 2.21: InaccessibleTensorError
        f(tf.constant(3))
    assert type(info.value).__name__ == "InaccessibleTensorError"


def test_list_append_over_tensor_elements_is_out_of_scope_type_error():
    @tf.function
    def f(x):
        out = []
        for v in x:                    # iterating a tensor is a staged loop in TF too
            out.append(v * 2)
        return out[0]

    with pytest.raises(ValueError, match="out of scope"):   # TF: InaccessibleTensorError
        f(tf.constant([1., 2.]))


def test_list_append_in_python_loop_is_unrolled_and_stacks():
    @tf.function
    def f(x):
        out = []
        for i in range(3):
            out.append(x * i)
        return tf.stack(out)

    np.testing.assert_array_equal(f(tf.constant([1., 2.])).numpy(), [[0, 0], [1, 2], [2, 4]])


# ---------------------------------------------------------------- lambdas, nested functions
def test_lambda_with_conditional_expression_on_a_tensor_is_converted():
    @tf.function
    def f(x):
        g = lambda v: v * 2. if v > 0 else -v      # noqa: E731
        return g(x)

    assert f(tf.constant(-3.)).numpy() == 3.0
    assert f(tf.constant(5.)).numpy() == 10.0


def test_lambda_with_boolean_operators_on_tensors():
    @tf.function
    def f(x):
        inside = lambda v: (v > 0) and (v < 10)    # noqa: E731
        return inside(x)

    assert bool(f(tf.constant(5)).numpy()) is True
    assert bool(f(tf.constant(12)).numpy()) is False


def test_nested_def_with_control_flow_is_converted_when_called():
    @tf.function
    def f(x):
        def g(v):
            if v > 0:
                return v * 2
            return -v
        return g(x) + g(-x)

    assert f(tf.constant(3)).numpy() == 6 + 3


# ---------------------------------------------------------------- break / continue / return
def test_guide_sum_even_with_continue():
    # The AutoGraph guide's example: 10 + 12 + 20
    @tf.function
    def sum_even(items):
        s = 0
        for c in items:
            if c % 2 > 0:
                continue
            s += c
        return s

    assert sum_even(tf.constant([10, 12, 15, 20])).numpy() == 42


def test_break_in_staged_while_loop():
    @tf.function
    def f(n):
        i = tf.constant(0)
        s = tf.constant(0)
        while i < n:
            if s > 10:
                break
            s += i
            i += 1
        return i, s

    i, s = f(tf.constant(100))
    # s: 0,1,3,6,10,15 -> breaks once s = 15 > 10, after i was incremented to 6
    assert (i.numpy(), s.numpy()) == (6, 15)


def test_return_inside_staged_loop_raises_tf_not_implemented_error():
    # TF's control_flow._verify_loop_init_vars raises this for retval_ in a TF loop
    @tf.function
    def f(x):
        for v in x:
            if v > 2.:
                return v
        return tf.constant(-1.)

    with pytest.raises(NotImplementedError, match="return statement cannot be placed inside this TensorFlow loop"):
        f(tf.constant([1., 2., 3.]))


def test_return_inside_python_loop_with_tensor_condition_in_branch():
    @tf.function
    def f(x):
        for k in range(3):
            if k == 1:
                return x * k
        return x

    assert f(tf.constant(7.)).numpy() == 7.0


# ---------------------------------------------------------------- Keras call inside fit
class _SignModel(tf.keras.Model):
    """Python `if` on a tensor inside `call`: TF's Keras converts it."""

    def __init__(self, kernel):
        super().__init__()
        self.dense = tf.keras.layers.Dense(1, kernel_initializer=tf.keras.initializers.Constant(kernel))

    def call(self, x, training=None):
        y = self.dense(x)
        if tf.reduce_sum(y) > 0:
            y = y * 2.0
        else:
            y = -y
        return y


def _numpy_fit(w, b, x, y, lr, epochs):
    """The same model trained by hand (float64): full-batch SGD on mean squared error."""
    losses = []
    for _ in range(epochs):
        z = x @ w + b
        sign = 2.0 if z.sum() > 0 else -1.0
        pred = sign * z
        losses.append(np.mean((pred - y) ** 2))
        dpred = 2 * (pred - y) / pred.size
        dz = sign * dpred
        w, b = w - lr * x.T @ dz, b - lr * dz.sum(axis=0)
    return losses


@pytest.mark.parametrize("kernel", [1.0, -1.0])
def test_keras_fit_converts_python_control_flow_in_call(kernel):
    x = np.array([[1., 2.], [0.5, -1.], [2., 1.], [-1., 0.]], np.float32)
    y = np.array([[1.], [0.], [2.], [-1.]], np.float32)
    model = _SignModel(kernel)
    model.compile(tf.keras.optimizers.SGD(0.05), "mse")
    hist = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0)
    expected = _numpy_fit(np.full((2, 1), kernel), np.zeros(1), x.astype(np.float64), y.astype(np.float64),
                          0.05, 3)
    np.testing.assert_allclose(hist.history["loss"], expected, rtol=1e-5)
    assert model.make_train_function().experimental_get_tracing_count() == 1


def test_keras_call_not_converted_when_the_trace_has_autograph_off():
    model = _SignModel(1.0)
    model(np.ones((1, 2), np.float32))      # build eagerly
    f = tf.function(lambda x: model(x), autograph=False)
    with pytest.raises(TypeError, match="bool"):
        f(tf.constant(np.ones((1, 2), np.float32)))
