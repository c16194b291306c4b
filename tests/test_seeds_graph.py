"""Every graph-mode example of both seed documents (../shared/seeds/), run as
packaged in jitgrad/seeds/graph_examples.py, printing the documents' numbers.

The documents were printed by numpy 1.x; numpy 2 would print a float32 scalar
as ``np.float32(2.0)`` inside a list, so results are formatted under
``np.printoptions(legacy="1.25")``, which restores the old repr.
"""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.seeds import graph_examples as G

pytestmark = pytest.mark.usefixtures("graph_mode")


def _printed(value):
    """What the document's print(...) shows; a tuple of results stands for
    consecutive prints, joined with " | " as in graph_examples.py."""
    if isinstance(value, tuple):
        return " | ".join(_printed(v) for v in value)
    with np.printoptions(legacy="1.25"):
        return str(value)


@pytest.mark.parametrize("name, fn, expected", G.DOC_004, ids=[e[0] for e in G.DOC_004])
def test_doc_004_graph_examples(name, fn, expected):
    assert _printed(fn()) == expected


def test_doc_004_aggregation_methods_all_print_16():
    # The document runs ADD_N (default) and ACCUMULATE_N; the other two
    # accepted values give the same number.
    for method in (tf.AggregationMethod.ADD_N, tf.AggregationMethod.DEFAULT,
                   tf.AggregationMethod.EXPERIMENTAL_TREE, tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
        assert _printed(G.aggregated(method)) == "[16.0]"


def test_doc_004_grad_ys_is_float32_left_to_right_sum():
    # 0.3*2x + 0.7*3x^2 at x=2 in float32, the contributions summed in TF's
    # order (y_1's, then y_2's): 1.2 + 8.4 = 9.599999 (not 9.6).
    (value,) = G.grad_ys_weighted()
    assert value.dtype == np.float32
    assert value == np.float32(np.float32(0.3) * np.float32(4.0)) + np.float32(np.float32(0.7) * np.float32(12.0))


def test_doc_004_minimum_search():
    v, vals = G.minimum_search()
    assert len(vals) == 40
    assert isinstance(v, np.float32)
    # The document prints f"{v[0]}": a numpy float32 formatted with an empty
    # format spec goes through Python float, hence the float64 digits.
    assert f"{v}" == "1.9999998807907104"
    assert f"------ 极值点：{v}" == "------ 极值点：1.9999998807907104"
    # The document's second line, 3.0000000000000284, is user-side numpy
    # arithmetic 2*((x-2)**2)+3 on that float32 scalar. numpy < 2 promoted the
    # float32 scalar with Python ints to float64; numpy >= 2 (NEP 50) keeps
    # float32 and gives 3.0. The float64 evaluation reproduces the document.
    f = lambda x: 2 * ((x - 2) ** 2) + 3  # noqa: E731 - the document's lambda
    assert f"{f(float(v))}" == "3.0000000000000284"
    assert f(v) == 3.0
    # The descent is monotone towards 2 from 0.1.
    assert all(a <= b for a, b in zip(vals, vals[1:]))
    assert vals[0] == np.float32(np.float32(0.1) - np.float32(0.1) * np.float32(4 * (np.float32(0.1) - 2)))


def test_doc_004_minimum_search_values_match_numpy_float32_recurrence():
    # Each step computes x - rate * (2 * (2 * (x - 2)^1 ... )) in float32 with
    # TF's gradient formulas; check the whole trajectory against the same
    # float32 recurrence evaluated with numpy (Pow's gradient y*x^(y-1)*g,
    # then Mul by 2, in TF's operand order).
    _, vals = G.minimum_search()
    f32 = np.float32
    x = f32(0.1)
    expected = []
    for _ in range(40):
        d = x - f32(2)
        # y = 2 * d**2 + 3; dy/dd = (2 * 1) * 2 * d**1 through Pow's grad.
        gpow = (f32(2) * d ** (f32(2) - f32(1))) * f32(2)  # mul_no_nan(y*x^(y-1), g) with g = 2
        x = x - f32(0.1) * gpow
        expected.append(x)
    np.testing.assert_array_equal(np.array(vals, np.float32), np.array(expected, np.float32))


@pytest.fixture
def tf1_graph_mode():
    # Document 000 is TF1 code: ops built at top level and tf.Session() with
    # no graph argument, which is how TF 2 runs it after disable_eager_execution.
    tf.compat.v1.disable_eager_execution()
    yield
    tf.compat.v1.enable_eager_execution()


@pytest.mark.parametrize("name, fn, expected", G.DOC_000, ids=[e[0] for e in G.DOC_000])
def test_doc_000_graph_examples(tf1_graph_mode, name, fn, expected):
    assert _printed(fn()) == expected


def test_doc_000_lines_as_printed(tf1_graph_mode):
    # The document prints each sess.run on its own line (Python 2 print).
    g1, g2, g3, g4 = G.stop_gradient_lists()
    assert [_printed(v) for v in (g1, g2, g3, g4)] == ["[24. 48.]", "[15.0]", "[39.0]", "[3.0]"]
    assert isinstance(g1, np.ndarray) and g1.dtype == np.float32  # stop_gradient([a, b]) packs a tensor
    tf.compat.v1.reset_default_graph()
    t1, t2 = G.total_vs_partial()
    assert [_printed(t1), _printed(t2)] == ["[9.0, 4.0, 1.0]", "[1.0, 1.0, 1.0]"]


def test_doc_000_tf_session_alias_and_compat_session_agree(tf1_graph_mode):
    a = tf.constant(1.)
    b = tf.constant(1.)
    c = tf.constant(1.)
    g = tf.gradients([5 * a + 3 * b + 2 * c], [a, b, c], stop_gradients=[a, b, c])
    with tf.Session() as s1:
        r1 = s1.run(g)
    with tf.compat.v1.Session() as s2:
        r2 = s2.run(g)
    assert _printed(r1) == _printed(r2) == "[5.0, 3.0, 2.0]"


def test_doc_000_examples_also_run_inside_graph_as_default():
    # The same TF1 code inside `with tf.Graph().as_default():` (TF 2 users'
    # other way of running TF1 code) prints the same numbers.
    for name, fn, expected in G.DOC_000:
        with tf.Graph().as_default():
            assert _printed(fn()) == expected, name
