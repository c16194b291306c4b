"""TensorArray.identity (was missing: AttributeError): the same contents and properties,
eagerly, in tf.function, in a Session and on a loop's array."""
import numpy as np

import jitgrad as tf


def _written_through_identity():
    ta = tf.TensorArray(tf.float32, size=2).write(0, 3.0)
    ta2 = ta.identity().write(1, 4.0)
    return ta2.stack(), ta2.size()


def _loop_through_identity():
    ta = tf.TensorArray(tf.float32, size=3)
    body = lambda i, t: (i + 1, t.write(i, tf.cast(i, tf.float32) * 2.0).identity())
    return tf.while_loop(lambda i, t: i < 3, body, (0, ta))[1].identity().stack()


def _session(fn):
    g = tf.Graph()
    with g.as_default():
        out = fn()
        with tf.compat.v1.Session(graph=g) as s:
            return s.run(out)


def test_identity_keeps_contents():
    for stacked, size in (_written_through_identity(), tf.function(_written_through_identity)(),
                          _session(_written_through_identity)):
        np.testing.assert_array_equal(np.asarray(stacked), [3.0, 4.0])
        assert int(size) == 2


def test_identity_in_a_loop():
    for got in (_loop_through_identity(), tf.function(_loop_through_identity)(), _session(_loop_through_identity)):
        np.testing.assert_array_equal(np.asarray(got), [0.0, 2.0, 4.0])
