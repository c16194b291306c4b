"""tf.print: TF's text (expected strings written by hand from TF's C++ format and
checked against TF 2.21), eager, graph and function modes, compiled and interpreted."""
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.ops.logging_ops import tensor_text


def _out(capsys):
    return capsys.readouterr().out


@pytest.mark.parametrize("value, summarize, text", [
    (np.float32([1.0, 2.5, 1 / 3]), 3, "[1 2.5 0.333333343]"),       # %.6g unless it does not round-trip
    (np.float32(0.1), 3, "0.1"),
    (np.float32(1e10), 3, "1e+10"),
    (np.float32(123456789.0), 3, "123456792"),
    (np.float64(1 / 3), 3, "0.33333333333333331"),                   # doubles: %.15g, else %.17g
    (np.float64(0.1), 3, "0.1"),
    (np.float32(-0.0), 3, "-0"),
    (np.float32([np.nan, -np.inf]), 3, "[nan -inf]"),
    (np.array([True, False]), 3, "[1 0]"),
    (np.arange(10), 3, "[0 1 2 ... 7 8 9]"),
    (np.arange(10), -1, "[0 1 2 3 4 5 6 7 8 9]"),
    (np.arange(10), None, "[0 1 2 3 4 5 6 7 8 9]"),
    (np.arange(6), 3, "[0 1 2 3 4 5]"),                             # 6 is not more than 2*3
    (np.arange(7), 3, "[0 1 2 ... 4 5 6]"),
    (np.arange(6).reshape(2, 3), 3, "[[0 1 2]\n [3 4 5]]"),
    (np.arange(24).reshape(2, 3, 4), 2,
     "[[[0 1 2 3]\n  [4 5 6 7]\n  [8 9 10 11]]\n\n [[12 13 14 15]\n  [16 17 18 19]\n  [20 21 22 23]]]"),
    (np.arange(3).reshape(3, 1), 1, "[[0]\n ...\n [2]]"),
    (np.zeros([0], np.float32), 3, "[]"),
    (np.zeros([1, 0], np.float32), 3, "[\n ...]"),                  # TF's own quirk for an empty row
    (np.int64(5), 3, "5"),
])
def test_tensor_text(value, summarize, text):
    assert tensor_text(value, summarize) == text


def test_eager_prints_now_with_tf_template(capsys):
    assert tf.print("a", {"b": tf.constant(1), "a": [2, tf.constant([3.5])]}, "c", sep=",", end="!\n",
                    output_stream=sys.stdout) is None
    assert _out(capsys) == "a,{'a': [2, [3.5]], 'b': 1},c!\n"
    tf.print(1, 2.5, None, [1, "x"], output_stream=sys.stdout)
    assert _out(capsys) == "1 2.5 None [1, 'x']\n"
    v = tf.Variable([1.0, 2.0])
    tf.print("v", v, output_stream=sys.stdout)
    tf.print(output_stream=sys.stdout)
    assert _out(capsys) == "v [1 2]\n\n"
    tf.print(tf.constant(np.arange(100).reshape(10, 10)), output_stream=sys.stdout)
    rows = ["[[0 1 2 ... 7 8 9]", " [10 11 12 ... 17 18 19]", " [20 21 22 ... 27 28 29]", " ...",
            " [70 71 72 ... 77 78 79]", " [80 81 82 ... 87 88 89]", " [90 91 92 ... 97 98 99]]"]
    assert _out(capsys) == "\n".join(rows) + "\n"


def test_default_stream_is_stderr_and_files_append(capsys, tmp_path):
    tf.print("to stderr", tf.constant([1, 2]))
    captured = capsys.readouterr()
    assert captured.err == "to stderr [1 2]\n" and captured.out == ""
    path = tmp_path / "log.txt"
    tf.print("one", output_stream=f"file://{path}")
    tf.print("two", tf.constant(2.5), output_stream=f"file://{path}")
    assert path.read_text() == "one\ntwo 2.5\n"
    with pytest.raises(ValueError, match="Unsupported output stream"):
        tf.print("x", output_stream=object())


def test_function_prints_on_every_call(graph_mode, capsys):
    before = tf.cache_info()["fallbacks"]
    v = tf.Variable([1.0, 2.0])

    @tf.function
    def f(x):
        tf.print("x:", x, "sum", tf.reduce_sum(x), output_stream=sys.stdout)
        tf.print("constant only", output_stream=sys.stdout)
        v.assign_add(x)
        tf.print("v", v, summarize=1, output_stream=sys.stdout)
        return x * 2.0

    for i in range(3):
        f(tf.constant([1.0, 2.0]) + float(i))
    expect = []
    vv = np.array([1.0, 2.0])
    for i in range(3):
        x = np.array([1.0, 2.0]) + i
        vv = vv + x
        expect += [f"x: [{x[0]:g} {x[1]:g}] sum {x.sum():g}", "constant only", f"v [{vv[0]:g} {vv[1]:g}]"]
    assert _out(capsys) == "\n".join(expect) + "\n"
    assert f.experimental_get_tracing_count() == 1
    assert tf.cache_info()["fallbacks"] == before     # the compiled path printed, no interpreter fallback


def test_graph_print_runs_when_run_or_depended_on(graph_mode, capsys):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        p = tf.print("graph", x, output_stream=sys.stdout)
        assert isinstance(p, tf.Operation)
        with tf.control_dependencies([p]):
            y = tf.identity(x * 3.0)
        z = x + 1.0
        with tf.compat.v1.Session() as sess:
            np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0]}), [3.0, 6.0])
            sess.run(p, {x: [5.0, 6.0]})
            sess.run(z, {x: [7.0, 8.0]})              # does not depend on the print
            sess.run(y, {x: [1.0, 2.5]})
    assert _out(capsys) == "graph [1 2]\ngraph [5 6]\ngraph [1 2.5]\n"
