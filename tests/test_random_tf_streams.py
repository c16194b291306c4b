"""Stateful tf.random ops draw TF 2.21's numbers (ops/random_ops.py): TF's Philox op
(GuardedPhiloxRandom: key = global seed, counter = op seed << 64, each run reserving 256
calls per element; RandomShuffle (n - 1 + 3) // 4 calls) under TF's get_seed rules.

Expected values: outputs of real TF 2.21 (tensorflow-cpu) for the same programs, written
as TF prints them (``TF_*`` below: the first elements, and for longer draws their float64
sum), and, independently, the streams derived here from ops/philox.py (itself checked
against Philox's known-answer vectors in test_random_stateless.py), Python's
``random.Random(global seed)`` (TF's eager op seeds) and a Fisher-Yates written here.
"""
import random

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.cache import set_enabled
from jitgrad.ops import philox

tf1 = tf.compat.v1
DEFAULT_GRAPH_SEED = 87654321     # TF's global seed for an op seed without a global one
CALLS = 256                        # Philox calls a stateful op reserves per element


@pytest.fixture(autouse=True)
def _fresh():
    set_enabled(False)
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)
    set_enabled(None)


def head(t, k=5):
    return np.asarray(t).ravel()[:k].tolist()


def uniform_row(g, s, n, k=0, dtype=np.float32):
    """Run k of a uniform op with seeds (g, s) drawing n elements."""
    return philox.uniform((g, (s << 64) + CALLS * n * k), n, dtype)


def normal_row(g, s, n, k=0, dtype=np.float32):
    return philox.normal((g, (s << 64) + CALLS * n * k), n, dtype)


def fisher_yates(g, s, n):
    """TF's RandomShuffle of range(n) on stream (g, s << 64): swap i with i + word_i mod (n - i)."""
    w = philox.words((g, s << 64), n - 1)
    order = list(range(n))
    for i in range(n - 1):
        j = i + int(w[i]) % (n - i)
        order[i], order[j] = order[j], order[i]
    return order


# ---------------------------------------------------------------- eager
# TF 2.21, /tmp/s37/rnd.py: the eager program of test_eager_program_matches_tf, in order
TF_EAGER = [
    [0.5380393266677856, 0.3646186590194702, 0.5816301107406616],
    [0.32536470890045166, 0.13870060443878174, 0.6480493545532227],
    [0.16898059844970703, 0.9725481271743774],
    [0.4243431091308594, 0.4340393543243408],
    [-0.32364845275878906, 1.8577390909194946, 0.39556974172592163, 0.2311697006225586, 0.24243995547294617],
    [-0.0819405078567429, 0.7000041037959288, -0.9817526122359683, 1.1014191573917291],
    [-0.13862521946430206, -0.24789245426654816, -0.22179745137691498, 0.9156513810157776, 0.32554540038108826],
    [5, 9, 8, 9],
    [3, 2, 4, 7],
    [-1.971155047416687, 0.8554582595825195, 2.5732998847961426],
    [0.0, 0.0, 2.0, 2.0, 2.0],
    [0, 4, 2, 5, 1],
    [0.5380393266677856, 0.3646186590194702, 0.5816301107406616],   # after set_seed(1234) again
    [0.4839409589767456, 0.5062030553817749],                      # no global seed, seed=7
    [0.2652016878128052, 0.6309045553207397],                      # ... continued
]


def _eager_program():
    tf.random.set_seed(1234)
    out = [tf.random.uniform([3]), tf.random.uniform([3]), tf.random.uniform([2], seed=1),
           tf.random.uniform([2], seed=1), tf.random.normal([5], seed=1), tf.random.normal([4], dtype=tf.float64),
           tf.random.truncated_normal([5], seed=3), tf.random.uniform([4], 0, 10, dtype=tf.int32, seed=2),
           tf.random.uniform([4], 0, 10, dtype=tf.int64), tf.random.uniform([3], -2., 5.),
           tf.nn.dropout(tf.ones([8]), 0.5, seed=4), tf.random.shuffle(tf.range(6), seed=5)]
    tf.random.set_seed(1234)
    out.append(tf.random.uniform([3]))
    tf.random.set_seed(None)
    out += [tf.random.uniform([2], seed=7), tf.random.uniform([2], seed=7)]
    return [head(t) for t in out]


def test_eager_program_matches_tf():
    assert _eager_program() == TF_EAGER
    assert _eager_program() == TF_EAGER      # set_seed restarts every stream and op seed


def test_eager_seeds_derived_independently():
    tf.random.set_seed(1234)
    ops = random.Random(1234)                 # TF: unseeded eager ops take op seeds from it
    s1, s2 = ops.randint(0, 2 ** 31 - 1), ops.randint(0, 2 ** 31 - 1)
    np.testing.assert_array_equal(tf.random.uniform([3]), uniform_row(1234, s1, 3))
    np.testing.assert_array_equal(tf.random.uniform([3]), uniform_row(1234, s2, 3))
    # an explicit op seed: (global, op); the same op and seeds again continue one stream
    np.testing.assert_array_equal(tf.random.uniform([2], seed=1), uniform_row(1234, 1, 2, 0))
    np.testing.assert_array_equal(tf.random.uniform([2], seed=1), uniform_row(1234, 1, 2, 1))
    # another op (normal) with the same seeds has its own stream, from the start
    np.testing.assert_array_equal(tf.random.normal([5], seed=1), normal_row(1234, 1, 5))
    # dropout keeps where its uniform draw >= rate, scaled by 1 / (1 - rate)
    keep = uniform_row(1234, 4, 8) >= 0.5
    np.testing.assert_array_equal(tf.nn.dropout(tf.ones([8]), 0.5, seed=4), np.where(keep, 2.0, 0.0))
    assert head(tf.random.shuffle(tf.range(6), seed=5)) == fisher_yates(1234, 5, 6)[:5]
    tf.random.set_seed(None)                  # an op seed alone: TF's default global seed
    np.testing.assert_array_equal(tf.random.uniform([2], seed=7), uniform_row(DEFAULT_GRAPH_SEED, 7, 2))
    np.testing.assert_array_equal(tf.random.uniform([2], seed=7), uniform_row(DEFAULT_GRAPH_SEED, 7, 2, 1))


def test_seeds_are_truncated_and_zero_zero_is_remapped():
    # TF's get_seed: both seeds mod 2^31 - 1, and (0, 0) -> (0, 2^31 - 1)
    tf.random.set_seed(2 ** 31 - 1 + 5)
    np.testing.assert_array_equal(tf.random.uniform([3], seed=2 ** 31 + 1), uniform_row(5, 2, 3))
    tf.random.set_seed(0)
    np.testing.assert_array_equal(tf.random.uniform([3], seed=0), uniform_row(0, 2 ** 31 - 1, 3))


# TF 2.21, /tmp/s37/rnd2.py (set_seed(77), in order): (first four as float64, float64 sum)
TF_EAGER_DTYPES = [
    ([12.0, 13.0, 18.0, 19.0], 190.0),
    ([6.0, 9.0, 4.0, 1.0], 45.0),
    ([3.0, 1.0, 6.0, 9.0], 45.0),
    ([0.8525390625, 0.2314453125, 0.310546875, 0.212890625], 2.2724609375),
    ([0.890625, 0.4765625, 0.0625, 0.2890625], 3.34375),
    ([0.126220703125, 0.01953125, 2.291015625, -0.171875], -6.662685394287109),
    ([0.7238376053637019, 0.6023019581447093, 0.6481031496643033, 0.49662015263857984], 492.23458308391935),
    ([-0.29951635777029423, -0.6423984281533043, 0.7983437561568719, 1.8862008945071298], -46.190184641186875),
    ([-494869567742.0, -428283833354.0, -1011015006855.0, 842411318262.0], -318109196862.0),
    ([3.0], 3.0),
    ([0.5515948534011841, 0.29140138626098633], 0.8429962396621704),
]


def test_eager_dtypes_and_shuffles_match_tf():
    tf.random.set_seed(77)
    out = [tf.random.shuffle(tf.reshape(tf.range(20), [10, 2]), seed=3), tf.random.shuffle(tf.range(10.), seed=3),
           tf.random.shuffle(tf.range(10), seed=3), tf.random.uniform([7], dtype=tf.float16),
           tf.random.uniform([7], dtype=tf.bfloat16, seed=1), tf.random.normal([1001], dtype=tf.float16, seed=1),
           tf.random.uniform([3, 333], dtype=tf.float64), tf.random.truncated_normal([999], dtype=tf.float64, seed=8),
           tf.random.uniform([5], minval=-(2 ** 40), maxval=2 ** 40, dtype=tf.int64, seed=2),
           tf.random.shuffle(tf.constant(3.0)), tf.random.uniform([2])]
    assert out[3].dtype == tf.float16 and out[4].dtype == tf.bfloat16 and out[8].dtype == tf.int64
    for t, (first, total) in zip(out, TF_EAGER_DTYPES):
        a = np.asarray(t, dtype=np.float64).ravel()
        assert a[:4].tolist() == first
        assert float(a.sum()) == pytest.approx(total, rel=1e-12)


def test_shuffle_derived_independently():
    tf.random.set_seed(77)
    rows = tf.random.shuffle(tf.reshape(tf.range(20), [10, 2]), seed=3).numpy()
    order = fisher_yates(77, 3, 10)
    np.testing.assert_array_equal(rows, np.arange(20).reshape(10, 2)[order])
    # another dtype is another kernel, so a stream of its own from the start: the same order
    np.testing.assert_array_equal(tf.random.shuffle(tf.range(10.), seed=3), np.array(order, np.float32))


# ---------------------------------------------------------------- tf.function
# TF 2.21, /tmp/s37/rnd.py: two calls of f, (uniform [3], normal [2], uniform [2] seed 9)
TF_FUNCTION = [
    ([0.18286478519439697, 0.6899895668029785, 0.6732248067855835], [-1.376889705657959, -0.012583157978951931],
     [0.8590066432952881, 0.2115098237991333]),
    ([0.3876405954360962, 0.6976070404052734, 0.817644476890564], [0.26627683639526367, -0.031191304326057434],
     [0.5389642715454102, 0.4155099391937256]),
]


def test_function_takes_the_eager_seed_when_traced_and_counts_its_op_seeds(graph_mode):
    tf.random.set_seed(5)

    @tf.function
    def f():
        return tf.random.uniform([3]), tf.random.normal([2]), tf.random.uniform([2], seed=9)
    calls = [tuple(head(t) for t in f()) for _ in range(2)]
    assert calls == TF_FUNCTION
    # graph seed 5; unseeded ops take the graph's op seeds 0, 1; a second call continues
    for k, (u, n, s9) in enumerate(calls):
        assert u == uniform_row(5, 0, 3, k).tolist()
        assert n == normal_row(5, 1, 2, k).tolist()
        assert s9 == uniform_row(5, 9, 2, k).tolist()


# ---------------------------------------------------------------- v1 graphs and sessions
def _session(g, mode):
    return tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode))


# TF 2.21, /tmp/s37/rnd.py: two runs of [uniform [3], normal [2] seed 3] under set_random_seed(42)
TF_V1 = [([0.8354591131210327, 0.9162973165512085, 0.4946495294570923], [0.8021454811096191, 0.5056790113449097]),
         ([0.3661808967590332, 0.015453338623046875, 0.6758037805557251], [0.5065540671348572, 0.3115288019180298])]


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_v1_graph_seed_set_inside_the_graph(mode):
    tf.random.set_seed(11)         # eager: does not reach a tf.Graph() (TF 2: its seed is None)
    g = tf.Graph()
    with g.as_default():
        assert g.seed is None
        tf1.set_random_seed(42)
        assert g.seed == 42
        u = tf.random.uniform([3])
        n = tf.random.normal([2], seed=3)
    sess = _session(g, mode)
    runs = [tuple(head(v) for v in sess.run([u, n])) for _ in range(2)]
    assert runs == TF_V1
    for k, (uv, nv) in enumerate(runs):
        assert uv == uniform_row(42, 0, 3, k).tolist()
        assert nv == normal_row(42, 3, 2, k).tolist()


def test_v1_graph_without_a_seed_uses_the_default_global_seed_for_an_op_seed():
    tf.random.set_seed(11)
    g = tf.Graph()
    with g.as_default():
        a = tf.random.uniform([2], seed=7)
    np.testing.assert_array_equal(_session(g, "compiled").run(a), uniform_row(DEFAULT_GRAPH_SEED, 7, 2))


# TF 2.21, /tmp/s37/rnd2.py: two runs of [while-loop sum of 3 uniform [3], cond normal [2],
# shuffle(range(8)), glorot_uniform [3, 4]] in a graph seeded 11; (first four, sum)
TF_REGIONS = [
    [([1.8130288124084473, 2.2270965576171875, 1.047839641571045], 5.08796501159668),
     ([-0.4223545491695404, 0.5721652507781982], 0.14981070160865784),
     ([6.0, 1.0, 0.0, 4.0], 28.0),
     ([0.22745180130004883, -0.5157967209815979, 0.2134770154953003, 0.43405306339263916], 1.7044769525527954)],
    [([1.0970584154129028, 2.0337257385253906, 1.8034517765045166], 4.93423593044281),
     ([1.1923298835754395, 2.464745044708252], 3.6570749282836914),
     ([6.0, 5.0, 4.0, 7.0], 28.0),
     ([0.9134572744369507, -0.14386385679244995, -0.3486294746398926, 0.633746862411499], 0.8210613429546356)],
]


def _regions_graph():
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(11)
        _, acc = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + tf.random.uniform([3])),
                               [tf.constant(0), tf.zeros([3])])
        c = tf.cond(tf.constant(True), lambda: tf.random.normal([2]), lambda: tf.zeros([2]))
        sh = tf.random.shuffle(tf.range(8))
        init = tf1.glorot_uniform_initializer()([3, 4])
    return g, [acc, c, sh, init]


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_draws_in_loops_conds_shuffle_and_v1_initializer_match_tf(mode):
    g, fetches = _regions_graph()
    sess = _session(g, mode)
    for want in TF_REGIONS:
        got = sess.run(fetches)
        for v, (first, total) in zip(got, want):
            a = np.asarray(v, dtype=np.float64).ravel()
            assert a[:4].tolist() == first
            assert float(a.sum()) == pytest.approx(total, rel=1e-6)   # (float32 sums: order)


def test_region_draws_derived_independently():
    g, (acc, c, sh, init) = _regions_graph()
    av, cv = _session(g, "compiled").run([acc, c])
    # the loop body and the branch are graphs of their own, seeded by the outer graph,
    # with their own op-seed counts (0 each); the loop draws once per iteration
    want = np.zeros(3, np.float32)
    for k in range(3):
        want = want + uniform_row(11, 0, 3, k)
    np.testing.assert_array_equal(av, want)
    np.testing.assert_array_equal(cv, normal_row(11, 0, 2))
    # the outer graph counts its own unseeded ops: shuffle op seed 0, the initializer's 1
    shv, iv = _session(g, "compiled").run([sh, init])
    np.testing.assert_array_equal(shv, fisher_yates(11, 0, 8))
    lim = np.float32(np.sqrt(6.0 / (3 + 4)))       # glorot: uniform in [-limit, limit)
    np.testing.assert_array_equal(iv.ravel(), uniform_row(11, 1, 12) * (lim - -lim) + -lim)


# TF 2.21 (/tmp/s37t/t3.py): get_variable's default initializer (TF 1's glorot_uniform) and a
# truncated_normal_initializer(seed=2), in a graph seeded 7
TF_GET_VARIABLE = ([0.4698139429092407, -0.7815077304840088, -0.07627063989639282, 0.6607152223587036,
                    -0.25232863426208496, -0.5824759006500244],
                   [-1.4716817140579224, -0.6164555549621582, -0.37067508697509766, 0.8462656736373901,
                    -0.031040756031870842])


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_get_variable_initializers_match_tf(mode):
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(7)
        w = tf1.get_variable("w", [3, 4])
        w2 = tf1.get_variable("w2", [5], initializer=tf1.truncated_normal_initializer(seed=2))
        init = tf1.global_variables_initializer()
    sess = _session(g, mode)
    sess.run(init)
    wv, w2v = sess.run([w, w2])
    assert (head(wv, 6), head(w2v)) == TF_GET_VARIABLE
    lim = np.float32(np.sqrt(6.0 / (3 + 4)))
    np.testing.assert_array_equal(wv.ravel(), uniform_row(7, 0, 12) * (lim - -lim) + -lim)
    np.testing.assert_array_equal(w2v, philox.truncated_normal((7, 2 << 64), 5, np.float32))


def test_compiled_and_interpreter_sessions_agree_bit_for_bit():
    runs = {}
    for mode in ("compiled", "interpret"):
        g, fetches = _regions_graph()
        with g.as_default():
            extra = [tf.random.truncated_normal([9], dtype=tf.float64), tf.random.uniform([5], 0, 7, dtype=tf.int64),
                     tf.random.uniform([6], dtype=tf.float16), tf.nn.dropout(tf.ones([16]), 0.25)]
        sess = _session(g, mode)
        runs[mode] = [sess.run(fetches + extra) for _ in range(3)]
    for ra, rb in zip(runs["compiled"], runs["interpret"]):
        for a, b in zip(ra, rb):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- one stream per Session, as TF's kernels
# TF 2.21 (/tmp/s37t/t6.py): two Sessions on one graph seeded 1, interleaved; then make_callable
TF_SESSIONS = [
    [0.8126964569091797, 0.07857465744018555], [0.8126964569091797, 0.07857465744018555],   # s1, s2: u
    [0.8489425182342529, 0.09832477569580078], [0.8489425182342529, 0.09832477569580078],   # s1, s2: u
    [1.0208722352981567, 1.617258071899414],                                                # s1: loop of 2
    [0.7787855863571167, 0.8011977672576904], [0.24208664894104004, 0.8160603046417236],     # s2: loops of 1
    [3.188262939453125, 3.6291086673736572], [3.188262939453125, 3.6291086673736572],       # s1, s2: gamma
    [0.3800155520439148, 1.8104749917984009],                                               # s1: gamma
    [0.8126964569091797, 0.07857465744018555], [0.8489425182342529, 0.09832477569580078],    # s3's callable
    [0.3780696392059326, 0.3421337604522705],
]


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_each_session_restarts_the_graphs_random_streams(mode):
    g = tf.Graph()
    with g.as_default():
        tf.random.set_seed(1)
        u = tf.random.uniform([2])
        n = tf1.placeholder(tf.int32, [])
        acc = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + tf.random.uniform([2], seed=3)),
                            [0, tf.zeros([2])])[1]
        gm = tf.random.gamma([2], 2.0, seed=5)
    s1, s2 = _session(g, mode), _session(g, mode)
    got = [s1.run(u), s2.run(u), s1.run(u), s2.run(u), s1.run(acc, {n: 2}), s2.run(acc, {n: 1}),
           s2.run(acc, {n: 1}), s1.run(gm), s2.run(gm), s1.run(gm)]
    f = _session(g, mode).make_callable(u)
    got += [f() for _ in range(3)]     # (the later calls: the generated fast runner)
    assert [head(v) for v in got] == TF_SESSIONS
    # independently: each Session's u is the op's stream from its start
    for k, v in zip((0, 0, 1, 1), got[:4]):
        np.testing.assert_array_equal(v, uniform_row(1, 0, 2, k))
    np.testing.assert_array_equal(got[4], uniform_row(1, 3, 2, 0) + uniform_row(1, 3, 2, 1))
    np.testing.assert_array_equal(got[5], uniform_row(1, 3, 2, 0))
    np.testing.assert_array_equal(got[6], uniform_row(1, 3, 2, 1))
    for k, v in enumerate(got[10:]):
        np.testing.assert_array_equal(v, uniform_row(1, 0, 2, k))


# TF 2.21 (/tmp/s37t/t7.py): an eager op drawn in a py_function while Sessions run keeps the
# process's eager stream (TF's cached eager kernel), Session or not
TF_PY_FUNCTION = [[0.7331658601760864, 0.3838810920715332], [0.613243818283081, 0.41766679286956787],
                  [0.5412297248840332, 0.6283581256866455], [0.12003672122955322, 0.4223834276199341]]


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
def test_an_eager_draw_inside_a_session_run_continues_the_eager_stream(mode):
    tf.random.set_seed(4)
    got = [tf.random.uniform([2], seed=1)]
    g = tf.Graph()
    with g.as_default():
        y = tf.py_function(lambda: tf.random.uniform([2], seed=1), [], tf.float32)
    got += [_session(g, mode).run(y) for _ in range(2)]
    got.append(tf.random.uniform([2], seed=1))
    assert [head(v) for v in got] == TF_PY_FUNCTION
    for k, v in enumerate(got):
        np.testing.assert_array_equal(v, uniform_row(4, 1, 2, k))
