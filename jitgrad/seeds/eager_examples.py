"""Eager-mode examples of document 004 (second half: tf.GradientTape).

Each function is the document's code unchanged (bar the import and the
plotting); it prints what the document prints and returns the printed values.
EXAMPLES lists (name, function, the document's printed output); the demo and
tests/test_seeds_eager.py compare the captured prints with it.
"""
import numpy as np

import jitgrad as tf

# Two printed lines are numpy arithmetic on ``.numpy()`` values, not jitgrad: under numpy 1.x
# np.float32 op Python number gave float64, under numpy >= 2 (NEP 50) it stays float32. The
# document was made with numpy 1.x; with numpy 2 the same code prints the float32 results.
_NUMPY2 = int(np.__version__.split(".")[0]) >= 2
_MANUAL_WEIGHTED = "29.100000381469727" if _NUMPY2 else "29.1"   # document: 29.1
_MINIMUM_VALUE = "3.0" if _NUMPY2 else "3.0000000000000284"     # document: 3.0000000000000284


def programming_pattern():
    gp = tf.GradientTape()
    x = tf.constant(5.0)
    with gp:
        gp.watch(x)
        y = x * x
    grad = gp.gradient(y, x)
    print(grad)
    return grad


def persistent():
    gp = tf.GradientTape(persistent=True)
    x = tf.constant(5.0)
    with gp:
        gp.watch(x)
        y = x * x
    grad = gp.gradient(y, x)
    print(grad)
    grad2 = gp.gradient(y, x)
    print(grad2)
    return grad, grad2


def variable_auto_watch():
    gp = tf.GradientTape()
    x = tf.Variable(5.0)
    with gp:
        y = x * x
    grad = gp.gradient(y, x)
    print(grad)
    return grad


def multivariate():
    gp = tf.GradientTape(persistent=True)
    x = tf.constant(5.0)
    y = tf.constant(2.0)
    with gp:
        gp.watch(x)
        gp.watch(y)
        z = x ** 2 + 2 * y
    grad_x_y = gp.gradient(z, [x, y])
    grad_x = gp.gradient(z, [x])
    grad_y = gp.gradient(z, y)
    print(grad_x_y)
    print(grad_x)
    print(grad_y)
    return grad_x_y, grad_x, grad_y


def aggregated():
    gp = tf.GradientTape()
    x = tf.constant(5.0)
    with gp:
        gp.watch(x)
        y_1 = x ** 2
        y_2 = 2 * x
    grad = gp.gradient([y_1, y_2], x)
    print(grad)
    return grad


def stop_recording():
    gp = tf.GradientTape()
    x = tf.constant(5.0)
    with gp:
        gp.watch(x)
        y_1 = x ** 2
        with gp.stop_recording():
            y_2 = 2 * x
    grad = gp.gradient([y_1, y_2], x)
    print(grad)
    return grad


def reset():
    gp = tf.GradientTape()
    x = tf.constant(5.0)
    with gp:
        gp.watch(x)
        y_1 = x ** 2
        gp.reset()
        gp.watch(x)
        y_2 = 2 * x
    grad = gp.gradient([y_1, y_2], x)
    print(grad)
    return grad


def jacobian():
    gp = tf.GradientTape(persistent=True)
    x = tf.constant([5.0, 2.0])
    with gp:
        gp.watch(x)
        y = x ** 2
    grad = gp.gradient(y, x)
    print(grad)
    jaco = gp.jacobian(y, x)
    print(jaco)
    return grad, jaco


def watched_variables():
    gp = tf.GradientTape()
    x = tf.Variable(5.0)
    with gp:
        y = x * x
    vars = gp.watched_variables()  # noqa: A001 - the document's name
    print(vars)
    return vars


def minimum_search():
    """Gradient descent on 2(x-2)^2+3 with a tf.Variable (50 steps)."""
    def cal_grad(dy, dx):
        gp = tf.GradientTape()
        tx = dx
        with gp:
            ty = dy(tx)
        grad = gp.gradient(ty, tx)
        return grad

    vals = []
    N = 50
    rate = tf.constant(0.1)
    f = lambda p: 2 * ((p - 2) ** 2) + 3  # noqa: E731
    x = tf.Variable(0.1)
    for i in range(N):
        delta = cal_grad(f, x)
        x.assign_sub(rate * delta)
        vals.append(x.numpy())
    print(F"------ 极值点：{x.numpy()}")   # 最后一次极值点
    print(F"------ 极值：{(lambda x: 2 * ((x - 2) ** 2) + 3)(x.numpy())}")
    return x.numpy(), vals


def output_gradients():
    gp = tf.GradientTape(persistent=True)
    x = tf.Variable(5.0)
    with gp:
        y = x * x
        z = 2 * y + tf.sqrt(y)
        s = 3 * (x ** 2)
    vars = gp.watched_variables()  # noqa: A001
    print(vars)
    a = [0.1, 0.9]
    z_x = gp.gradient(z, x)
    print(F"z_x = {z_x.numpy()}")
    s_x = gp.gradient(s, x)
    print(F"y_x = {s_x.numpy()}")
    print(F"手工权重：z_x + z_y = {a[0] * z_x.numpy() + a[1] * s_x.numpy()}")
    print(F"手工无权重：z_x + z_y = {z_x.numpy() + s_x.numpy()}")
    grad = gp.gradient([z, s], x, output_gradients=a)
    print(F"权重：z_x + z_y = {grad.numpy()}")
    grad2 = gp.gradient([z, s], x)
    print(F"无权重：z_x + z_y = {grad2.numpy()}")
    return grad, grad2


def higher_order():
    x = tf.Variable(4.0)
    with tf.GradientTape() as g_2:
        with tf.GradientTape() as g_1:
            y = x ** 3
        dy_dx = g_1.gradient(y, x)
    d2y_dx2 = g_2.gradient(dy_dx, x)
    print(F"一阶导数{dy_dx}")
    print(F"二阶导数{d2y_dx2}")
    return dy_dx, d2y_dx2


_VAR = "(<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=5.0>,)"

# (name, function, what the document prints; lines separated by "\n")
EXAMPLES = [
    ("programming_pattern", programming_pattern, "tf.Tensor(10.0, shape=(), dtype=float32)"),
    ("persistent", persistent,
     "tf.Tensor(10.0, shape=(), dtype=float32)\ntf.Tensor(10.0, shape=(), dtype=float32)"),
    ("variable_auto_watch", variable_auto_watch, "tf.Tensor(10.0, shape=(), dtype=float32)"),
    ("multivariate", multivariate,
     "[<tf.Tensor: shape=(), dtype=float32, numpy=10.0>, <tf.Tensor: shape=(), dtype=float32, numpy=2.0>]\n"
     "[<tf.Tensor: shape=(), dtype=float32, numpy=10.0>]\n"
     "tf.Tensor(2.0, shape=(), dtype=float32)"),
    ("aggregated", aggregated, "tf.Tensor(12.0, shape=(), dtype=float32)"),
    ("stop_recording", stop_recording, "tf.Tensor(10.0, shape=(), dtype=float32)"),
    ("reset", reset, "tf.Tensor(2.0, shape=(), dtype=float32)"),
    ("jacobian", jacobian,
     "tf.Tensor([10.  4.], shape=(2,), dtype=float32)\n"
     "tf.Tensor(\n[[10.  0.]\n [ 0.  4.]], shape=(2, 2), dtype=float32)"),
    ("watched_variables", watched_variables, _VAR),
    ("minimum_search", minimum_search, "------ 极值点：1.9999998807907104\n------ 极值：" + _MINIMUM_VALUE),
    ("output_gradients", output_gradients,
     _VAR + "\nz_x = 21.0\ny_x = 30.0\n手工权重：z_x + z_y = " + _MANUAL_WEIGHTED + "\n手工无权重：z_x + z_y = 51.0\n"
     "权重：z_x + z_y = 29.09999656677246\n无权重：z_x + z_y = 51.0"),
    ("higher_order", higher_order, "一阶导数48.0\n二阶导数24.0"),
]
