"""Strings through tf.map_fn / tf.scan / tf.foldl in a graph (tf.function, Session): the loop
hands the body one string as a 0-d array and stacks the strings it returns as a string
vector, as TF does (before: an AttributeError on the bytes, or a vector of 0-d arrays)."""
import numpy as np

import jitgrad as tf


def _in_function(fn):
    return tf.function(fn)().numpy()


def _in_session(fn):
    g = tf.Graph()
    with g.as_default():
        out = fn()
        with tf.compat.v1.Session(graph=g) as s:
            return s.run(out)


def _both(fn):
    return [_in_function(fn), _in_session(fn)]


def test_map_fn_over_strings_to_lengths():
    fn = lambda: tf.map_fn(tf.strings.length, tf.constant(["a", "bcd"]), fn_output_signature=tf.int32)
    for got in _both(fn):
        np.testing.assert_array_equal(got, [1, 3])


def test_map_fn_returning_strings():
    fn = lambda: tf.map_fn(lambda e: e + "!", tf.constant(["a", "bcd"]))
    for got in _both(fn):
        assert got.shape == (2,)
        assert list(got) == [b"a!", b"bcd!"]


def test_map_fn_numbers_to_strings():
    fn = lambda: tf.map_fn(tf.strings.as_string, tf.constant([1, 22]), fn_output_signature=tf.string)
    for got in _both(fn):
        assert list(got) == [b"1", b"22"]


def test_scan_and_foldl_join_strings():
    for got in _both(lambda: tf.scan(lambda a, e: a + e, tf.constant(["a", "b", "c"]))):
        assert list(got) == [b"a", b"ab", b"abc"]
    for got in _both(lambda: tf.foldl(lambda a, e: a + e, tf.constant(["a", "b", "c"]))):
        assert got == b"abc"


def test_gather_one_string():
    for got in _both(lambda: tf.gather(tf.constant(["a", "bcd"]), 1)):
        assert got == b"bcd"
