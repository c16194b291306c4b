"""String tensors and tf.strings basics (issue 17, item 6). Expected texts are
what TF 2.21 prints for the same calls; string tensors are numpy object
arrays of bytes, never compiled (a Session run falls back, counted) and never
differentiated."""
import numpy as np
import pytest

import jitgrad as tf


def test_constants_and_printing():
    s = tf.constant("hello")
    assert str(s) == "tf.Tensor(b'hello', shape=(), dtype=string)"
    assert repr(s) == "<tf.Tensor: shape=(), dtype=string, numpy=b'hello'>"
    assert s.numpy() == b"hello" and s.dtype == tf.string and s.shape == ()
    v = tf.constant(["a", "bcd"])
    assert str(v) == "tf.Tensor([b'a' b'bcd'], shape=(2,), dtype=string)"
    assert repr(v) == "<tf.Tensor: shape=(2,), dtype=string, numpy=array([b'a', b'bcd'], dtype=object)>"
    assert tf.constant(b"raw").numpy() == b"raw"
    assert tf.constant([["a"], ["b"]]).shape == (2, 1)
    assert tf.constant(np.array(["u", "vé"])).numpy().tolist() == [b"u", "vé".encode()]
    assert str(tf.string) == "<dtype: 'string'>" and not tf.string.is_floating
    assert (tf.constant("x") + "y").numpy() == b"xy"
    assert tf.zeros_like(v).numpy().tolist() == [b"", b""]


def test_conversion_errors():
    with pytest.raises(ValueError):
        tf.constant(["a", 1])
    with pytest.raises(TypeError):
        tf.constant("a", tf.float32)
    with pytest.raises(TypeError):
        tf.constant(1.0, tf.string)


def test_join_length_case():
    v = tf.constant(["a", "bcd"])
    assert tf.strings.join(["a", "b"], separator="-").numpy() == b"a-b"
    assert tf.strings.join([v, "x"]).numpy().tolist() == [b"ax", b"bcdx"]
    np.testing.assert_array_equal(tf.strings.length(v).numpy(), [1, 3])
    assert tf.strings.length(v).dtype == tf.int32
    assert int(tf.strings.length("héllo")) == 6 and int(tf.strings.length("héllo", unit="UTF8_CHAR")) == 5
    assert tf.strings.upper(v).numpy().tolist() == [b"A", b"BCD"]
    assert tf.strings.lower("ABC").numpy() == b"abc"
    assert tf.strings.reduce_join([["a", "b"], ["c", "d"]], axis=1).numpy().tolist() == [b"ab", b"cd"]
    assert tf.strings.reduce_join([["a", "b"], ["c", "d"]], separator=",").numpy() == b"a,b,c,d"


def test_format_as_tf_prints():
    f = tf.strings.format
    assert f("x = {}, y = {}", [tf.constant([1.5, 2.0, 3.0]), tf.constant(7)]).numpy() == b"x = [1.5 2 3], y = 7"
    assert f("{}", tf.constant([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])).numpy() == b"[[1 2 3 4 5]\n [6 7 8 9 10]]"
    assert f("{}", tf.constant(["a", "b"])).numpy() == b'["a" "b"]'
    assert f("{}", tf.constant([True, False])).numpy() == b"[1 0]"
    assert f("{}", tf.reshape(tf.range(8), [2, 2, 2])).numpy() == b"[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]"
    assert f("{}", tf.range(10)).numpy() == b"[0 1 2 ... 7 8 9]"
    assert f("{}", tf.constant([np.pi, 1e10, 0.1, np.nan, -np.inf], tf.float32)).numpy() == \
        b"[3.14159274 1e+10 0.1 nan -inf]"
    assert f("{}", tf.constant([np.pi, 0.1], tf.float64)).numpy() == b"[3.1415926535897931 0.1]"
    assert f("{}", tf.reshape(tf.range(64), [8, 8])).numpy() == (
        b"[[0 1 2 ... 5 6 7]\n [8 9 10 ... 13 14 15]\n [16 17 18 ... 21 22 23]\n ...\n"
        b" [40 41 42 ... 45 46 47]\n [48 49 50 ... 53 54 55]\n [56 57 58 ... 61 62 63]]")
    assert f("{} and {}", [1, "a"]).numpy() == b'1 and "a"'
    with pytest.raises(ValueError):
        f("{} {}", [1])


def test_as_string_and_to_number():
    assert tf.strings.as_string(tf.constant([1.5, 2.0])).numpy().tolist() == [b"1.500000", b"2.000000"]
    assert tf.strings.as_string(3).numpy() == b"3"
    assert tf.strings.as_string(tf.constant([True])).numpy().tolist() == [b"true"]
    pi = tf.constant([np.pi], tf.float32)
    assert tf.strings.as_string(pi, precision=3).numpy().tolist() == [b"3.142"]
    assert tf.strings.as_string(pi, shortest=True).numpy().tolist() == [b"3.14159"]
    assert tf.strings.as_string(pi, scientific=True).numpy().tolist() == [b"3.141593e+00"]
    n = tf.strings.to_number("3.5")
    assert n.dtype == tf.float32 and float(n) == 3.5
    np.testing.assert_array_equal(tf.strings.to_number(["1", "2"], tf.int32).numpy(), [1, 2])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.strings.to_number("abc")


def test_graph_session_and_function(graph_mode):
    g = tf.Graph()
    with g.as_default():
        c = tf.constant("abc")
        p = tf.compat.v1.placeholder(tf.string, [2])
        j = tf.strings.join([c, "d"])
        n = tf.strings.length(p) * 2
        assert str(c) == 'Tensor("Const:0", shape=(), dtype=string)'
    before = tf.cache_info()["fallbacks"]
    with tf.compat.v1.Session(graph=g) as sess:
        got = sess.run([c, j, n], {p: ["x", "yz"]})
    assert got[0] == b"abc" and got[1] == b"abcd"
    np.testing.assert_array_equal(got[2], [2, 4])
    if graph_mode == "compiled":   # strings are never compiled: the run is an interpreter fallback, counted
        assert tf.cache_info()["fallbacks"] == before + 1

    @tf.function
    def shout(x):
        return tf.strings.join([tf.strings.upper(x), "!"])
    assert shout(tf.constant("hi")).numpy() == b"HI!"


def test_strings_are_not_differentiated():
    x = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        s = tf.strings.as_string(x)
        y = tf.strings.to_number(s) * x
    # the string path carries no gradient; only the direct use of x does (d(c*x)/dx = c = 2.0)
    assert float(tape.gradient(y, x)) == 2.0


def test_split_strip_substr_regex():
    # expected values: TF 2.21's output for the same calls
    assert tf.strings.split(tf.constant("Gray wolf"), sep=" ").numpy().tolist() == [b"Gray", b"wolf"]
    assert tf.strings.split("a  b").numpy().tolist() == [b"a", b"b"]
    assert tf.strings.split("a,,b", sep=",").numpy().tolist() == [b"a", b"", b"b"]
    assert tf.strings.split("a b c", maxsplit=1).numpy().tolist() == [b"a", b"b c"]
    assert tf.strings.bytes_split("abc").numpy().tolist() == [b"a", b"b", b"c"]
    with pytest.raises(NotImplementedError):
        tf.strings.split(["a b", "c"])          # TF returns a RaggedTensor
    assert tf.strings.strip(["  a ", "b\n"]).numpy().tolist() == [b"a", b"b"]
    assert tf.strings.substr("hello", 1, 3).numpy() == b"ell"
    assert tf.strings.substr(["hello", "abc"], [0, 1], [2, 5]).numpy().tolist() == [b"he", b"bc"]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.strings.substr("abc", 5, 1)
    assert tf.strings.regex_replace("a1b22", r"\d+", "#").numpy() == b"a#b#"
    assert tf.strings.regex_replace("a1b22", r"\d", "#", replace_global=False).numpy() == b"a#b22"
    np.testing.assert_array_equal(tf.strings.regex_full_match(["ab", "a1"], r"[a-z]+").numpy(), [True, False])


def test_split_in_graph(graph_mode):
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.string, [])
        parts = tf.strings.split(p)
        n = tf.size(parts)
    got, k = tf.compat.v1.Session(graph=g).run([parts, n], {p: "x yy zzz"})
    assert got.tolist() == [b"x", b"yy", b"zzz"] and k == 3
