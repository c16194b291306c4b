"""Graph-mode examples (doc 004, first half, and doc 000 run under TF1-style
graph mode via disable_eager_execution, as TF 2 users run TF1 code)."""
import jitgrad as tf


def first_order():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        y = x * x
        grad = tf.gradients(y, x)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [2.0]


def multivariate():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        y = tf.constant(2.0)
        z = x ** 2 + y ** 3
        grad = tf.gradients(z, [x, y])
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [2.0, 12.0]


def aggregated(aggregation_method=None):
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y_1 = x * x
        y_2 = x ** 3
        grad = tf.gradients([y_1, y_2], x, aggregation_method=aggregation_method)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [16.0]


def grad_ys_weighted():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y_1 = x * x
        y_2 = x ** 3
        grad = tf.gradients([y_1, y_2], x, grad_ys=[0.3, 0.7])
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [9.599999]


def second_order():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = x ** 4
        grad_1 = tf.gradients(y, x)
        grad_2 = tf.gradients(grad_1, x)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad_2)  # [48.0]


def chain_rule():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = x * x
        z = 5 * tf.sqrt(y)
        grad = tf.gradients(z, x)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [5.0]


def stop_gradients_zero():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = x * x
        z = 5 * tf.sqrt(y)
        grad = tf.gradients(z, x, stop_gradients=[y], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [0.0]


def stop_gradients_partial():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = x * x
        z = 5 * tf.sqrt(y)
        grad = tf.gradients(z, y, stop_gradients=[y])
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [1.25]


def stop_gradient_op():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(2.0)
        y = x * x
        y_ = tf.stop_gradient(y)
        z = 5 * tf.sqrt(y_)
        grad = tf.gradients(z, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [0.0]


def gate_gradients():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        y = x * x
        grad = tf.gradients(y, x, gate_gradients=True)
    sess = tf.compat.v1.Session(graph=g)
    return sess.run(grad)  # [2.0]


def minimum_search():
    """Gradient descent on 2(x-2)^2+3, rebuilding the graph with a new constant
    every iteration (the document's loop). Returns the final x and the list."""
    vals = []
    g = tf.Graph()
    sess = tf.compat.v1.Session(graph=g)
    with g.as_default():
        x = tf.constant(0.1)
        rate = tf.constant(0.1)
        N = 40
        for i in range(N):
            y = 2 * ((x - 2) ** 2) + 3
            grad = tf.gradients(y, x)
            x -= rate * grad
            v = sess.run(x)
            x = tf.constant(v[0])
            vals.append(v[0])
    return v[0], vals  # 1.9999998807907104


# ---- document 000 (TF1 style: top-level graph building and tf.Session()) ----
def partial_constants():
    a = tf.constant(1.)
    b = tf.constant(1.)
    c = tf.constant(1.)
    g = tf.gradients([5 * a + 3 * b + 2 * c], [a, b, c], stop_gradients=[a, b, c])
    sess = tf.Session()
    with sess:
        return sess.run(g)  # [5.0, 3.0, 2.0]


def partial_chain():
    a = tf.constant(1.)
    b = 2 * a
    c = 3 * b
    g = tf.gradients([a + b + c], [a, b, c], stop_gradients=[a, b, c])
    sess = tf.Session()
    with sess:
        return sess.run(g)  # [1.0, 1.0, 1.0]


def total_vs_partial():
    x = tf.constant(1.)
    a = 12 * x
    b = 2 * a
    c = 3 * b
    g1 = tf.gradients([a + b + c], [a, b, c])
    g2 = tf.gradients([a + b + c], [a, b, c], stop_gradients=[a, b, c])
    sess = tf.Session()
    with sess:
        return sess.run(g1), sess.run(g2)  # [9.0, 4.0, 1.0] [1.0, 1.0, 1.0]


def stop_gradient_lists():
    x = tf.constant(2.)
    a = 12 * x
    b = 2 * a
    c = 3 * x
    g1 = tf.stop_gradient([a, b])
    g2 = tf.gradients([a, c], [x])
    g3 = tf.gradients([a, b, c], [x])
    g4 = tf.gradients([a, b], a)
    sess = tf.Session()
    with sess:
        return sess.run(g1), sess.run(g2), sess.run(g3), sess.run(g4)  # [24. 48.] [15.0] [39.0] [3.0]


# (name, function, what the document prints; " | " separates consecutive prints)
DOC_004 = [
    ("first_order", first_order, "[2.0]"),
    ("multivariate", multivariate, "[2.0, 12.0]"),
    ("aggregated", aggregated, "[16.0]"),
    ("aggregated_accumulate_n",
     lambda: aggregated(tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N), "[16.0]"),
    ("grad_ys", grad_ys_weighted, "[9.599999]"),
    ("second_order", second_order, "[48.0]"),
    ("chain_rule", chain_rule, "[5.0]"),
    ("stop_gradients_zero", stop_gradients_zero, "[0.0]"),
    ("stop_gradients_partial", stop_gradients_partial, "[1.25]"),
    ("stop_gradient_op", stop_gradient_op, "[0.0]"),
    ("gate_gradients", gate_gradients, "[2.0]"),
]

DOC_000 = [
    ("partial_constants", partial_constants, "[5.0, 3.0, 2.0]"),
    ("partial_chain", partial_chain, "[1.0, 1.0, 1.0]"),
    ("total_vs_partial", total_vs_partial, "[9.0, 4.0, 1.0] | [1.0, 1.0, 1.0]"),
    ("stop_gradient_lists", stop_gradient_lists, "[24. 48.] | [15.0] | [39.0] | [3.0]"),
]
