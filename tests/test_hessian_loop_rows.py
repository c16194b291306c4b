"""The fallbacks for loops the While batching rule (while_batching.py, tests in
test_while_batching.py) does not take, here forced by removing the rule: Hessians and jacobians
through a tf.while_loop of more than LOOP_ROWS_AT rows are computed by a while_loop over the
rows (loop_jacobians.py), not one copy of the loop per row (whose compile time grew faster than
the row count: 31 s for 64 rows). The loop
v_{t+1} = v_t + sin(b), v_0 = 0, gives v_T = T sin(b), so by hand, for loss = sum(v_T^2):
d loss / db = 2 T^2 sin(b) cos(b) = T^2 sin(2b), whose Hessian is diag(2 T^2 cos(2b)), and
d v_T / db = diag(T cos(b))."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad import batched_gradients as bg
from _loop_jacobians import check_batch_jacobian, check_tape_jacobians, sin_loop

tf1 = tf.compat.v1
N = bg.LOOP_ROWS_AT + 8       # rows beyond the batched pass's copies
B = np.linspace(-1.5, 1.5, N).astype(np.float64)


@pytest.fixture(autouse=True)
def _no_while_rule(monkeypatch):
    monkeypatch.delitem(bg._RULES, "While")




def _graph(n=N):
    g = tf.Graph()
    with g.as_default():
        T = tf1.placeholder(tf.int32, [])
        b = tf1.placeholder(tf.float64, [n])
        (h,) = tf.hessians(tf.reduce_sum(sin_loop(b, T) ** 2), b)
    return g, T, b, h


def _whiles(g):
    return sum(op.type == "While" for op in g.get_operations())


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_hessian_through_a_loop_of_many_rows(mode):
    g, T, b, h = _graph()
    before = tf.cache_info()["fallbacks"]
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        for t in (0, 1, 3, 7):       # one kernel for every trip count
            np.testing.assert_allclose(s.run(h, {T: t, b: B}), np.diag(2 * t * t * np.cos(2 * B)),
                                       rtol=1e-12, atol=1e-12)
    if mode == "compiled":
        assert tf.cache_info()["fallbacks"] == before


def test_the_graph_does_not_grow_with_the_rows():
    # one loop over the rows: the same number of While ops for N and 2N elements
    # (the batched pass's per-row copies would add loops in proportion to the rows)
    assert _whiles(_graph(N)[0]) == _whiles(_graph(2 * N)[0])


def test_few_rows_keep_the_batched_pass():
    # at or below LOOP_ROWS_AT the loop is copied per row, as before (cheaper per call)
    n = bg.LOOP_ROWS_AT
    g, T, b, h = _graph(n)
    assert _whiles(g) > _whiles(_graph(N)[0])
    with tf1.Session(graph=g) as s:
        x = B[:n]
        np.testing.assert_allclose(s.run(h, {T: 3, b: x}), np.diag(18 * np.cos(2 * x)), rtol=1e-12, atol=1e-12)


def test_tape_jacobians_in_a_function():
    check_tape_jacobians(B)


def test_batch_jacobian_through_a_loop_of_many_rows():
    check_batch_jacobian(np.stack([B, B[::-1] * 0.5]))   # N inner elements per example
