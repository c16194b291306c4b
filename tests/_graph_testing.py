"""Helpers shared by the graph-mode op tests.

``check_op`` builds ONE graph per call (so the compiled mode compiles few
kernels): placeholders for the inputs, ``y = fn(*xs)``, a random weighting
``loss = reduce_sum(y * w)`` and ``tf.gradients(loss, xs)``. It checks y's
static shape and value against numpy, and each gradient against central
finite differences of the same graph's ``loss`` (float64 inputs), which
covers broadcasting gradients reducing back to the input shapes.
"""
import numpy as np

import jitgrad as tf


def session(graph):
    return tf.compat.v1.Session(graph=graph)


def run_graph(build, feeds, mode, fallback_ok=False):
    """Runs ``build(*placeholders)`` (a list of fetches) on the arrays ``feeds`` in a Session of
    ``mode``; a compiled run must not fall back to the interpreter (fallback_ok: types that
    have no lowering anywhere yet)."""
    g = tf.Graph()
    with g.as_default():
        ps = [tf.compat.v1.placeholder(f.dtype, f.shape) for f in feeds]
        fetches = build(*ps)
    before = tf.cache_info()["fallbacks"]
    with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode)) as s:
        out = s.run(fetches, dict(zip(ps, feeds)))
    if mode == "compiled" and not fallback_ok:
        assert tf.cache_info()["fallbacks"] == before, "the compiled run fell back to the interpreter"
    return out


def dtype_id(v):
    """A pytest id for a numpy dtype parameter."""
    return np.dtype(v).name if isinstance(v, type) else str(v)


def run_default_graph(fetches, feeds):
    """``fetches`` of the default graph, run by a session closed afterwards."""
    with tf.compat.v1.Session() as s:
        return s.run(fetches, feeds)


def _placeholder(a, known_shape=True):
    return tf.compat.v1.placeholder(tf.as_dtype(a.dtype), a.shape if known_shape else None)


def numeric_grad(f, x, eps=1e-6):
    """Central differences of the scalar function f at float64 array x."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for j in range(flat.size):
        old = flat[j]
        flat[j] = old + eps
        fp = f(x)
        flat[j] = old - eps
        fm = f(x)
        flat[j] = old
        gflat[j] = (fp - fm) / (2 * eps)
    return g


def check_op(fn, *inputs, expected=None, wrt=None, rtol=1e-6, atol=1e-7, eps=1e-6, grad=True, seed=0,
             value_rtol=1e-12, value_atol=0.0):
    """Checks fn's value/shape (against ``expected``, a numpy result) and its
    gradient w.r.t. the float inputs (or the indices in ``wrt``).

    Returns (value, grads) as computed by the graph.
    """
    inputs = [np.asarray(a) for a in inputs]
    if wrt is None:
        wrt = [i for i, a in enumerate(inputs) if a.dtype.kind == "f"]
    g = tf.Graph()
    with g.as_default():
        xs = [_placeholder(a) for a in inputs]
        y = fn(*xs)
        if expected is not None:
            exp = np.asarray(expected)
            assert tuple(y.shape.as_list()) == exp.shape, (y.shape, exp.shape)
            assert y.dtype == tf.as_dtype(exp.dtype), (y.dtype, exp.dtype)
        fetches = {"y": y}
        if grad and wrt:
            w = np.random.default_rng(seed).uniform(0.5, 1.5, y.shape.as_list()).astype(y.dtype.as_numpy_dtype)
            loss = tf.reduce_sum(y * tf.constant(w))
            # (a row gather's gradient is IndexedSlices, as TF's: compared dense)
            grads = [tf.convert_to_tensor(gi) if isinstance(gi, tf.IndexedSlices) else gi
                     for gi in tf.gradients(loss, [xs[i] for i in wrt])]
            for i, gi in zip(wrt, grads):
                assert gi is not None, f"no gradient for input {i}"
                assert gi.shape.is_compatible_with(inputs[i].shape), (gi.shape, inputs[i].shape)
            fetches["loss"] = loss
            fetches["grads"] = grads
    sess = session(g)
    feed = {x: a for x, a in zip(xs, inputs)}
    out = sess.run(fetches, feed)
    if expected is not None:
        np.testing.assert_allclose(out["y"], expected, rtol=value_rtol, atol=value_atol)
        assert np.asarray(out["y"]).dtype == np.asarray(expected).dtype
    if not (grad and wrt):
        return out["y"], None
    for i, gi in zip(wrt, out["grads"]):
        assert np.shape(gi) == inputs[i].shape

        def f(v, i=i):
            return sess.run(fetches["loss"], {**feed, xs[i]: v})
        num = numeric_grad(f, inputs[i], eps)
        np.testing.assert_allclose(gi, num, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")
    return out["y"], out["grads"]


def check_hessian(fn, x, rtol=1e-5, atol=1e-6, eps=1e-5):
    """tf.hessians(reduce_sum(fn(x)), x) against finite differences of the
    graph's own first derivative (float64)."""
    x = np.asarray(x, np.float64)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.float64, x.shape)
        y = tf.reduce_sum(fn(p))
        (grad,) = tf.gradients(y, p)
        (h,) = tf.hessians(y, p)
        assert h.shape.as_list() == list(x.shape) * 2
    sess = session(g)
    hv = sess.run(h, {p: x})
    n = x.size
    num = np.zeros((n, n))
    for j in range(n):
        xp, xm = x.copy().reshape(-1), x.copy().reshape(-1)
        xp[j] += eps
        xm[j] -= eps
        gp = sess.run(grad, {p: xp.reshape(x.shape)}).reshape(-1)
        gm = sess.run(grad, {p: xm.reshape(x.shape)}).reshape(-1)
        num[:, j] = (gp - gm) / (2 * eps)
    np.testing.assert_allclose(hv.reshape(n, n), num, rtol=rtol, atol=atol)
    return hv
