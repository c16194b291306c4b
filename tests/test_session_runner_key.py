"""session.runner_key is the key Session.run computes inline for its hot-path runners
(ConcreteFunction and make_callable look runners up by it): the two must agree for
every fetch form, with and without feeds, and keys of different forms never collide."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.session import runner_key


def _graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = tf.compat.v1.placeholder(tf.float32, [3])
        a = x * 2.
        b = tf.reduce_sum(x * y)
        c = tf.constant(np.array([1., 2., 3.], np.float32)) * 3.
    return g, x, y, a, b, c


@pytest.mark.parametrize("form", ["list", "tuple", "tensor"])
def test_run_files_its_runner_under_runner_key(form):
    g, x, y, a, b, c = _graph()
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))
    xv = np.array([1., 2., 3.], np.float32)
    yv = np.array([4., 5., 6.], np.float32)
    fetches = {"list": [a, b], "tuple": (a, b), "tensor": b}[form]
    feed = {x: xv, y: yv}
    for _ in range(3):
        out = sess.run(fetches, feed_dict=feed)
    assert runner_key(fetches, feed) in sess._fast
    nofeed = {"list": [c], "tuple": (c,), "tensor": c}[form]
    for _ in range(3):
        sess.run(nofeed)
    assert runner_key(nofeed, {}) in sess._fast
    # the runner's answers, checked by hand
    expected_b = 1 * 4 + 2 * 5 + 3 * 6
    if form == "tensor":
        assert out == expected_b
    else:
        np.testing.assert_array_equal(out[0], [2., 4., 6.])
        assert out[1] == expected_b
        assert type(out) is (list if form == "list" else tuple)


def test_keys_of_different_forms_differ():
    g, x, y, a, b, c = _graph()
    keys = [runner_key([a, b], {}), runner_key([a], {b: 0}), runner_key((a, b), {}), runner_key(a, {}),
            runner_key(a, {b: 0}), runner_key([a, b], {x: 0}), runner_key([a], {b: 0, x: 0}),
            runner_key([], {a: 0}), runner_key((), {})]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_a_dead_refs_id_reused_by_another_tensors_ref_finds_no_runner(mode):
    """Feeds keyed by Tensor.ref(): run() keys its runner by the feed keys' ids, so a
    ref that died could lend its id to a new ref of another tensor, and the runner of
    the first feed would take the second feed's value (y fed 5 computed as x = 5: 15)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = x * 3.0
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    r = x.ref()
    for _ in range(3):
        assert sess.run(y, {r: 1.0}) == 3.0
    dead = id(r)
    del r
    held = []                    # each candidate a new object, until one has the dead ref's id
    for _ in range(100000):
        c = y.ref()
        if id(c) == dead:
            break
        held.append(c)
    assert sess.run(y, {c: 5.0}) == 5.0      # a fed tensor is its fed value (TF)
    assert sess.run(y, {x.ref(): 2.0}) == 6.0
