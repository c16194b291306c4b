"""tf.einsum (ops/einsum.py): a composite of transpose / reshape / reduce_sum / multiply /
matmul. Expected values from numpy's einsum in float64; gradients from central finite
differences of numpy's einsum; compiled runs must not fall back to the interpreter."""
import string

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")
ph = tf.compat.v1.placeholder

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("...ij,jk->...ik", [(2, 3, 4, 5), (5, 6)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("ijk->", [(2, 3, 4)]), ("ijk->kj", [(2, 3, 4)]),
    ("ab,ab->ab", [(3, 4), (3, 4)]), ("ab,ab", [(3, 4), (3, 4)]), ("...i,...i->...", [(2, 1, 3), (4, 3)]),
    ("iij->j", [(3, 3, 2)]), ("i,ij,j->", [(3,), (3, 4), (4,)]), ("ab,cd->abcd", [(2, 3), (4, 5)]),
    ("ba,ca->bc", [(3, 4), (5, 4)]), ("...,...->...", [(2, 3), (3,)]), ("ij,kj->ik", [(0, 3), (4, 3)]),
    ("bij,jk->bik", [(2, 3, 4), (4, 5)]), ("i j , j k -> i k", [(2, 3), (3, 2)]), ("ij...,jk...->ik...", [(2, 3, 2), (3, 4, 2)]),
]


def _arrays(rng, shapes, dtype=np.float32):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy(no_fallback, eq, shapes):
    xs = _arrays(np.random.default_rng(len(eq)), shapes)
    want = np.einsum(eq, *[x.astype(np.float64) for x in xs])
    g = tf.Graph()
    with g.as_default():
        feeds = [ph(tf.float32, x.shape) for x in xs]
        out = tf.einsum(eq, *feeds)
    got = tf.compat.v1.Session(graph=g).run(out, dict(zip(feeds, xs)))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _random_equation(rng):
    """1-3 operands of distinct labels (a repeat now and then: a diagonal), sizes per label,
    an output of some of the labels in random order (or numpy's implicit one)."""
    labels = list(string.ascii_lowercase[:rng.integers(1, 6)])
    sizes = {c: int(rng.integers(1, 5)) for c in labels}
    specs = []
    for _ in range(rng.integers(1, 4)):
        spec = list(rng.choice(labels, size=rng.integers(0, min(4, len(labels)) + 1), replace=False))
        if spec and rng.random() < 0.15:
            spec.insert(int(rng.integers(0, len(spec) + 1)), spec[0])
            sizes[spec[0]] = max(sizes[spec[0]], 1)
        specs.append("".join(spec))
    used = sorted(set("".join(specs)))
    if rng.random() < 0.2:
        eq = ",".join(specs)
    else:
        out = list(rng.permutation(used))[:rng.integers(0, len(used) + 1)] if used else []
        eq = ",".join(specs) + "->" + "".join(out)
    return eq, [tuple(sizes[c] for c in s) for s in specs]


def test_generated_equations_compiled_and_gradients(no_fallback):
    rng = np.random.default_rng(7)
    for trial in range(40):
        eq, shapes = _random_equation(rng)
        xs = _arrays(rng, shapes, np.float64)
        want = np.einsum(eq, *xs)
        w = rng.standard_normal(want.shape)
        g = tf.Graph()
        with g.as_default():
            # dims unknown until run (not with a diagonal: diag_part needs them when built)
            unknown = trial % 3 == 0 and all(len(set(t)) == len(t) for t in eq.split("->")[0].split(","))
            feeds = [ph(tf.float64, [None] * len(s) if unknown else s) for s in shapes]
            out = tf.einsum(eq, *feeds)
            grads = tf.gradients(tf.reduce_sum(out * w), feeds)
        got, got_grads = tf.compat.v1.Session(graph=g).run([out, grads], dict(zip(feeds, xs)))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=eq)
        for i, (x, gx) in enumerate(zip(xs, got_grads)):
            fd = np.zeros_like(x)
            for idx in np.ndindex(x.shape):
                hi, lo = [a.copy() for a in xs], [a.copy() for a in xs]
                hi[i][idx] += 1e-6
                lo[i][idx] -= 1e-6
                fd[idx] = (np.sum(np.einsum(eq, *hi) * w) - np.sum(np.einsum(eq, *lo) * w)) / 2e-6
            np.testing.assert_allclose(gx, fd, rtol=1e-6, atol=1e-6, err_msg=f"{eq} d/d input {i}")


def test_unknown_batch_dims_and_integer_inputs(no_fallback):
    rng = np.random.default_rng(3)
    q, k = _arrays(rng, [(2, 3, 4, 5), (2, 3, 6, 5)])
    g = tf.Graph()
    with g.as_default():
        qp, kp = ph(tf.float32, [None, None, 4, 5]), ph(tf.float32, [None, None, 6, 5])
        scores = tf.einsum("bhqd,bhkd->bhqk", qp, kp)
        ints = tf.einsum("ij,jk->ik", tf.constant([[1, 2], [3, 4]]), tf.constant([[5, 6], [7, 8]]))
    assert scores.shape.as_list() == [None, None, 4, 6]
    s = tf.compat.v1.Session(graph=g)
    for b in (2, 1):
        np.testing.assert_allclose(s.run(scores, {qp: q[:b], kp: k[:b]}),
                                   np.einsum("bhqd,bhkd->bhqk", q[:b], k[:b]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(s.run(ints), [[19, 22], [43, 50]])


def test_eager_function_and_errors():
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(tf.einsum("ij,jk->ik", a, a).numpy(), [[7, 10], [15, 22]])
    np.testing.assert_array_equal(tf.linalg.einsum("ij->ji", a).numpy(), [[1, 3], [2, 4]])
    f = tf.function(lambda x: tf.einsum("ij,ij->i", x, x))
    np.testing.assert_array_equal(f(a).numpy(), [5, 25])
    with pytest.raises(InvalidArgumentError):            # eagerly as TF: the op's error
        tf.einsum("ij,jk->ik", a, tf.constant([[1.0, 2.0, 3.0]]))
    with pytest.raises(InvalidArgumentError):
        tf.einsum("ijk->i", a)
    with pytest.raises(InvalidArgumentError):
        tf.einsum("ij,jk->ik", a, tf.constant([[1.0]], tf.float64))
    with pytest.raises(ValueError):
        tf.einsum("ij->k", a)
    with pytest.raises(ValueError):
        tf.einsum("ij->ii", a)
    with pytest.raises(ValueError):
        tf.einsum("i1->i", a)
    with tf.Graph().as_default():                         # in a graph: ValueError / TypeError
        b = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        with pytest.raises(ValueError):
            tf.einsum("ij,jk->ik", b, tf.constant([[1.0, 2.0, 3.0]]))
        with pytest.raises(TypeError):
            tf.einsum("ij,jk->ik", b, tf.constant([[1.0]], tf.float64))
