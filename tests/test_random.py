"""tf.random: distributions, TF's seeding rules, fresh draws per run in every
execution mode, and random ops as runtime arguments of compiled kernels."""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.cache import set_enabled


@pytest.fixture(autouse=True)
def _fresh():
    set_enabled(False)
    tf.clear_cache()
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)
    set_enabled(None)


def S(g, mode="compiled"):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))


N = 200_000


def _check_uniform(v, lo, hi):
    assert v.min() >= lo and v.max() < hi
    # mean of U(lo, hi): (lo+hi)/2, standard error (hi-lo)/sqrt(12 N)
    assert abs(v.astype(np.float64).mean() - (lo + hi) / 2) < 6 * (hi - lo) / np.sqrt(12 * v.size)


def _check_normal(v, mean, std):
    v = v.astype(np.float64)
    assert abs(v.mean() - mean) < 6 * std / np.sqrt(v.size)
    assert abs(v.std() / std - 1) < 6 / np.sqrt(2 * v.size)


def test_eager_distributions_shapes_and_dtypes():
    u = tf.random.uniform([N])
    assert u.dtype == tf.float32 and u.shape == (N,)
    _check_uniform(u.numpy(), 0.0, 1.0)
    _check_uniform(tf.random.uniform([N], -3.0, 5.0, dtype=tf.float64).numpy(), -3.0, 5.0)
    n = tf.random.normal([N // 100, 100], mean=2.0, stddev=0.5)
    assert n.shape == (N // 100, 100) and n.dtype == tf.float32
    _check_normal(n.numpy().ravel(), 2.0, 0.5)
    t = tf.random.truncated_normal([N], stddev=3.0).numpy()
    assert np.abs(t).max() <= 6.0
    # a normal truncated at 2 sigma has standard deviation 0.8796 sigma
    assert abs(t.std() / (3.0 * 0.87962566) - 1) < 0.02
    i = tf.random.uniform([N], 3, 9, dtype=tf.int32).numpy()
    assert i.dtype == np.int32 and set(np.unique(i)) == set(range(3, 9))
    assert tf.random.uniform([], dtype=tf.float64).shape == ()
    assert tf.random.normal(tf.TensorShape([2, 0])).shape == (2, 0)


def test_global_seed_repeats_the_program_and_successive_calls_differ():
    tf.random.set_seed(1234)
    a1, a2 = tf.random.uniform([5]).numpy(), tf.random.uniform([5]).numpy()
    b1 = tf.random.normal([5], seed=7).numpy()
    b2 = tf.random.normal([5], seed=7).numpy()
    assert not np.array_equal(a1, a2) and not np.array_equal(b1, b2)   # TF: same op seed, new values
    tf.random.set_seed(1234)
    assert np.array_equal(tf.random.uniform([5]).numpy(), a1)
    assert np.array_equal(tf.random.uniform([5]).numpy(), a2)
    assert np.array_equal(tf.random.normal([5], seed=7).numpy(), b1)
    tf.random.set_seed(99)
    assert not np.array_equal(tf.random.uniform([5]).numpy(), a1)


def _graph(seed=5):
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(seed)
        r = tf.random.uniform([64], -1.0, 1.0)
        x = tf.compat.v1.placeholder(tf.float32, [64])
        y = tf.reduce_sum(r * x)
        grads = tf.gradients(y, [x, r])
        w = tf.Variable(tf.random.normal([8, 4], stddev=0.1))
        init = tf.compat.v1.global_variables_initializer()
    return g, r, x, y, grads, w, init


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_graph_draws_fresh_values_each_run_and_one_value_within_a_run(mode):
    g, r, x, y, grads, w, init = _graph()
    sess = S(g, mode)
    sess.run(init)
    ones = np.arange(64, dtype=np.float32)
    seen = []
    for _ in range(3):   # the second and later runs go through the compiled fast runner
        rv, yv, (gx, gr) = sess.run([r, y, grads], {x: ones})
        assert rv.dtype == np.float32 and rv.min() >= -1 and rv.max() < 1
        # one draw per run: every fetch of the run sees the same r
        np.testing.assert_allclose(yv, np.dot(rv.astype(np.float64), ones), rtol=1e-5)
        assert np.array_equal(gx, rv) and np.array_equal(gr, ones)
        seen.append(rv)
    assert not np.array_equal(seen[0], seen[1]) and not np.array_equal(seen[1], seen[2])
    wv = sess.run(w)
    assert wv.shape == (8, 4) and 0 < wv.std() < 0.3


def test_compiled_and_interpreter_draw_the_same_sequence():
    runs = {}
    for mode in ("compiled", "interpret"):
        g, r, x, y, grads, w, init = _graph(seed=11)
        sess = S(g, mode)
        sess.run(init)
        runs[mode] = [sess.run(r) for _ in range(3)] + [sess.run(w)]
    for a, b in zip(runs["compiled"], runs["interpret"]):
        assert a.tobytes() == b.tobytes()


def test_random_ops_are_kernel_arguments_not_fallbacks():
    for seed in (1, 2):   # the same graph with other seeds: no new compile
        g, r, x, y, grads, w, init = _graph(seed)
        sess = S(g)
        sess.run(init)
        sess.run([y, grads], {x: np.ones(64, np.float32)})
    info = tf.cache_info()
    assert info["fallbacks"] == 0
    assert info["compiles"] == 2   # the initializer's kernel and the gradient's kernel, once each


def test_function_draws_new_values_per_call():
    @tf.function
    def f(x):
        return x + tf.random.normal([3])

    x = tf.constant([0.0, 0.0, 0.0])
    a, b = f(x).numpy(), f(x).numpy()
    assert a.shape == (3,) and not np.array_equal(a, b)


def test_variable_initialised_eagerly_from_random():
    tf.random.set_seed(3)
    v = tf.Variable(tf.random.truncated_normal([100, 10], stddev=0.05))
    assert v.shape == (100, 10) and np.abs(v.numpy()).max() <= 0.1
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(v * v)
    np.testing.assert_allclose(tape.gradient(loss, v).numpy(), 2 * v.numpy(), rtol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="maxval"):
        tf.random.uniform([2], dtype=tf.int32)
    with pytest.raises(ValueError, match="minval < maxval"):
        tf.random.uniform([2], 5, 5, dtype=tf.int64)
    with pytest.raises(ValueError):
        tf.random.normal([2], dtype=tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError):     # TF 2.21's kernel, eagerly
        tf.random.uniform([-1])
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [1])
        with pytest.raises(ValueError, match="static shape"):
            tf.random.uniform(n)


def test_compat_v1_names():
    tf.compat.v1.set_random_seed(5)
    a = tf.compat.v1.random_normal([3]).numpy()
    tf.compat.v1.set_random_seed(5)
    assert np.array_equal(tf.compat.v1.random.normal([3]).numpy(), a)
    assert tf.compat.v1.random_uniform([2]).shape == (2,)
    assert tf.compat.v1.truncated_normal([2]).shape == (2,)


@pytest.mark.parametrize("dtype,nmant", [("float16", 10), ("bfloat16", 7), ("float32", 23),
                                         ("float64", 52)])
def test_uniform_draws_on_tfs_grid_below_maxval(dtype, nmant, monkeypatch):
    """Draws are TF's: nmant random mantissa bits, multiples of 2^-nmant up to 1 - 2^-nmant.
    A float64 draw rounded to float32 reached 1.0 (one element in 2^25, seen once as a failure
    of the [0, 1) check above), and a finer float32 draw shifted to [1, 2) rounded to 2.0."""
    from jitgrad.ops import philox, random_ops      # (bfloat16: ml_dtypes is in the test extras)
    dt = tf.as_dtype(dtype)

    # the largest possible draws: every Philox word all ones (TF keeps the low nmant bits)
    monkeypatch.setattr(philox, "words", lambda stream, n: np.full(n, 0xFFFFFFFF, np.uint32))
    top = random_ops.Sampler((1, 2)).draw("RandomUniform", (5,), dt.np, {"dtype": dt})
    monkeypatch.undo()
    assert top.dtype == dt.np
    assert (top.astype(np.float64) == 1.0 - 2.0 ** -nmant).all()
    assert (top + np.asarray(1, dt.np)).astype(np.float64).max() < 2.0   # [1, 2) stays below 2
    # real seeded draws, through the API: on the grid, in [0, 1), reproducible
    tf.random.set_seed(5)
    v = tf.random.uniform([N], dtype=dt).numpy()
    _check_uniform(v, 0.0, 1.0)
    scaled = v.astype(np.float64) * 2.0 ** nmant
    assert np.array_equal(scaled, np.floor(scaled))
    assert len(np.unique(v)) > min(N, 2 ** nmant) // 2
    tf.random.set_seed(5)
    assert np.array_equal(tf.random.uniform([N], dtype=dt).numpy(), v)
