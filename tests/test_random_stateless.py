"""tf.random.stateless_* / split / fold_in / gamma / poisson / Generator: TF 2.21's values
bit for bit (ops/philox.py, ops/philox_rejection.py).

Expected values: Philox-4x32-10's published known-answer vectors (Random123's kat_vectors),
bit layouts worked out by hand, seeded statistics, and (the ``TF`` table) outputs of real
TF 2.21 (tensorflow-cpu) for the same calls, as bytes.
"""
import math

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError
from jitgrad.ops import libm_loops, philox

tf1 = tf.compat.v1


def _bytes(t):
    return np.atleast_1d(np.asarray(t.numpy() if hasattr(t, "numpy") else t)).view(np.uint8).tobytes().hex()


# ---------------------------------------------------------------- Philox itself
@pytest.mark.parametrize("key, counter, want", [
    (0, 0, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ((1 << 64) - 1, (1 << 128) - 1, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    (0xA4093822 | 0x299F31D0 << 32,
     0x243F6A88 | 0x85A308D3 << 32 | 0x13198A2E << 64 | 0x03707344 << 96,
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
])
def test_philox_known_answers(key, counter, want):
    assert philox.blocks(key, counter, [0])[0].tolist() == want
    assert philox.blocks_numpy(key, counter, [0])[0].tolist() == want


def test_philox_counter_carries_across_words():
    """Call k is Philox(counter + k) with a 128-bit add: from 2^64 - 1, call 1 is counter 2^64."""
    start = (1 << 64) - 1
    got = philox.blocks(5, start, [0, 1, 2])
    for k in range(3):
        assert got[k].tolist() == philox.blocks(5, start + k, [0])[0].tolist()


def test_native_philox_loop_equals_numpys_rounds():
    from jitgrad.ops import philox_native
    rng = np.random.default_rng(5)
    counters = [0, (1 << 64) - 3, (1 << 128) - 2, int.from_bytes(rng.bytes(16), "little")]
    for key in (0, (1 << 64) - 1, int(rng.integers(0, 2 ** 62))):
        for counter in counters:
            offsets = np.concatenate([np.arange(6, dtype=np.uint64), rng.integers(0, 2 ** 63, 20, dtype=np.uint64)])
            native = philox_native.blocks(key, counter, offsets)
            assert native is not None and native.tolist() == philox.blocks_numpy(key, counter, offsets).tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_native_uniform_equals_the_words_bit_tricks(dtype):
    """ops/philox_native.py's vectorised uniform loop (groups of 8 blocks, the rest in numpy):
    the floats of the words, across group edges and a counter that carries into its high half."""
    per = 4 if dtype == np.float32 else 2
    for key in (0, (1 << 64) - 1, 0x12345678):
        for counter in (7 << 64, (1 << 64) - 3, (1 << 64) - 40, (1 << 128) - 2):
            for n in (0, 1, 31, 32, 33, 8 * per * 3 + 5, 1000):
                got = philox.uniform((key, counter), n, dtype)
                w = philox.blocks_numpy(key, counter, np.arange(-(-n // per), dtype=np.uint64)).reshape(-1)
                if dtype == np.float32:
                    want = [(int(v) & 0x7FFFFF) / 2 ** 23 for v in w[:n]]
                else:
                    want = [((int(w[2 * i]) & 0xFFFFF) * 2 ** 32 + int(w[2 * i + 1])) / 2 ** 52 for i in range(n)]
                assert got.dtype == dtype and got.tolist() == want, (key, counter, n)


def test_generator_state_skips_256_calls_per_element_modulo_2_128():
    state = np.array([-1, -1, 9], dtype=np.int64)          # counter 2^128 - 1
    assert philox.skipped_state(state, 1).tolist() == [255, 0, 9]
    assert philox.skipped_state(np.array([5, 0, 9]), -0).tolist() == [5, 0, 9]
    assert philox.skipped_state(np.array([256, 1, 9]), -1).tolist() == [0, 1, 9]


def test_uniform_float_bit_tricks_by_hand():
    """float32: 23 low bits under exponent 0, minus 1 = (w & 0x7fffff) / 2^23; float64:
    20 bits of the first word and the second word; float16: the low 10 bits."""
    st = philox.stream_from_seed(3, 4)
    w = philox.words(st, 8)
    f32 = philox.uniform(st, 4, np.float32)
    assert f32.tolist() == [(int(v) & 0x7FFFFF) / 2 ** 23 for v in w[:4]]
    f64 = philox.uniform(st, 2, np.float64)
    assert f64.tolist() == [((int(w[2 * i]) & 0xFFFFF) * 2 ** 32 + int(w[2 * i + 1])) / 2 ** 52 for i in range(2)]
    f16 = philox.uniform(st, 4, np.float16)
    assert f16.astype(np.float64).tolist() == [(int(v) & 0x3FF) / 2 ** 10 for v in w[:4]]


def test_uniform_int_is_lo_plus_bits_mod_range():
    st = philox.stream_from_seed(-3, 99)
    w = philox.words(st, 8).astype(object)
    assert philox.uniform_int(st, 4, np.int32, -100, 1000).tolist() == [-100 + v % 1100 for v in w[:4]]
    bits = [w[2 * i] | w[2 * i + 1] << 32 for i in range(4)]
    lo, hi = -2 ** 62, 2 ** 62
    assert philox.uniform_int(st, 4, np.int64, lo, hi).tolist() == [lo + b % (hi - lo) for b in bits]


# ---------------------------------------------------------------- TF 2.21's outputs
# (dtype, shape, output bytes): outputs of TF 2.21 (tensorflow-cpu) for the calls in CALLS.
TF = {
    "uniform_f32": ("float32", [5], "5814583f88a7443e7c087f3f983c243e4c428b3e"),
    "uniform_f64": ("float64", [3], "e22931cf5814e83f260f292c7c08ef3f28ee988a9f84c63f"),
    "uniform_f16": ("float16", [5], "58388833c02b263b9830"),
    "uniform_bf16": ("bfloat16", [5], "b03e623ff83e183e183e"),
    "uniform_range_f32": ("float32", [4], "f8ac1d40c01afb3ecc59753f9cc01cc0"),
    "uniform_i32": ("int32", [6], "6b010000290100006a010000c70000004f03000013000000"),
    "uniform_i64": ("int64", [4], "0b241f9189e3fd17a2361cadcfe4bbfec70d63a6bfef6a103a8f7d6c1ce28838"),
    "full_u32": ("uint32", [3], "0b241f9189e3fdd7a2361cad"),
    "full_i64": ("int64", [3], "0b241f9189e3fdd7a2361cadcfe4bb3ec70d63a6bfef6ad0"),
    "normal_f32": ("float32", [5], "5a58ca3c381f47beafb5bebf3613db3e6389b73e"),
    "normal_f64": ("float64", [3], "0a097310d97ad43f83a278462c8ddebf0e9f76b890589a3f"),
    "normal_f16": ("float16", [4], "532639b2f6bdd936"),
    "trunc_f32": ("float32", [6], "5a58ca3c381f47beafb5bebf3613db3ef2bab3bf6319373e"),
    "trunc_f64": ("float64", [3], "0a097310d97ad43f83a278462c8ddebf7e743b5e9ffff9bf"),
    "trunc_bf16": ("bfloat16", [5], "ca3c47bebfbfdb3eb4bf"),
    "split": ("int64", [2, 2], "2c0aec41f19498673e84ffeb9387141693d0a200c51d53f15bb08d3f3e570823"),
    "fold_in": ("int64", [2], "2c0aec41f19498670700000000000000"),
    "gamma_f32": ("float32", [3, 2], "fa1e893d8d6c56400ad4203f30d359405bb8393e8fab1c40"),
    "gamma_f64": ("float64", [2, 2], "38969aa2dbfefb3fa2a6075d865d563fdc0f74774a82eb3fdc22040b282b183f"),
    "poisson_i32": ("int32", [3, 3], "000000000a00000065000000000000000e00000060000000010000000d0000006a000000"),
    "poisson_f32": ("float32", [4], "000080400000803f000080400000a040"),
}
CALLS = {
    "uniform_f32": lambda: tf.random.stateless_uniform([5], [1, 2]),
    "uniform_f64": lambda: tf.random.stateless_uniform([3], [1, 2], dtype=tf.float64),
    "uniform_f16": lambda: tf.random.stateless_uniform([5], [1, 2], dtype=tf.float16),
    "uniform_bf16": lambda: tf.random.stateless_uniform([5], [1, 2], dtype=tf.bfloat16),
    "uniform_range_f32": lambda: tf.random.stateless_uniform([4], [-7, 2 ** 40], minval=-2.5, maxval=3.0),
    "uniform_i32": lambda: tf.random.stateless_uniform([6], [3, 4], minval=-100, maxval=1000, dtype=tf.int32),
    "uniform_i64": lambda: tf.random.stateless_uniform([4], [3, 4], minval=-2 ** 62, maxval=2 ** 62, dtype=tf.int64),
    "full_u32": lambda: tf.random.stateless_uniform([3], [3, 4], minval=None, maxval=None, dtype=tf.uint32),
    "full_i64": lambda: tf.random.stateless_uniform([3], [3, 4], minval=None, maxval=None, dtype=tf.int64),
    "normal_f32": lambda: tf.random.stateless_normal([5], [10, -4]),
    "normal_f64": lambda: tf.random.stateless_normal([3], [10, -4], dtype=tf.float64),
    "normal_f16": lambda: tf.random.stateless_normal([4], [10, -4], dtype=tf.float16),
    "trunc_f32": lambda: tf.random.stateless_truncated_normal([6], [10, -4]),
    "trunc_f64": lambda: tf.random.stateless_truncated_normal([3], [10, -4], dtype=tf.float64),
    "trunc_bf16": lambda: tf.random.stateless_truncated_normal([5], [10, -4], dtype=tf.bfloat16),
    "split": lambda: tf.random.experimental.stateless_split(tf.constant([1, 2], tf.int64), 2),
    "fold_in": lambda: tf.random.experimental.stateless_fold_in(tf.constant([1, 2], tf.int64),
                                                                tf.constant(7, tf.int64)),
    "gamma_f32": lambda: tf.random.stateless_gamma([3, 2], [1, 2], alpha=[0.5, 3.0]),
    "gamma_f64": lambda: tf.random.stateless_gamma([2, 2], [1, 2], alpha=[1.0, 0.2], beta=2.0, dtype=tf.float64),
    "poisson_i32": lambda: tf.random.stateless_poisson([3, 3], [4, 5], lam=[0.5, 12.0, 100.0]),
    "poisson_f32": lambda: tf.random.stateless_poisson([4], [4, 5], lam=3.5, dtype=tf.float32),
}


@pytest.mark.parametrize("name", sorted(TF))
def test_eager_values_are_tfs(name):
    dtype, shape, want = TF[name]
    got = CALLS[name]()
    assert got.dtype.name == dtype and got.shape.as_list() == shape
    assert _bytes(got) == want


@pytest.mark.parametrize("mode", ["compiled", "interpret"])
@pytest.mark.parametrize("name", ["uniform_f32", "uniform_range_f32", "normal_f64", "trunc_f32", "uniform_i32",
                                  "gamma_f32", "poisson_i32"])
def test_session_values_are_tfs(name, mode):
    g = tf.Graph()
    with g.as_default():
        y = CALLS[name]()
    with tf1.Session(graph=g, config=tf1.ConfigProto(jitgrad_mode=mode)) as s:
        assert _bytes(s.run(y)) == TF[name][2]


def test_tf_function_with_a_seed_argument_gives_the_eager_values():
    f = tf.function(lambda s: tf.random.stateless_normal([7], s) * 2.0 + tf.random.stateless_uniform([7], s))
    for seed in ([8, 9], [8, 10], [-1, 2 ** 31 - 1]):
        eager = tf.random.stateless_normal([7], seed) * 2.0 + tf.random.stateless_uniform([7], seed)
        assert _bytes(f(tf.constant(seed))) == _bytes(eager)


def test_same_seed_same_values_other_seed_other_values():
    a = tf.random.stateless_uniform([64], [5, 6]).numpy()
    assert np.array_equal(a, tf.random.stateless_uniform([64], [5, 6]).numpy())
    assert np.array_equal(a, tf.random.stateless_uniform([64], tf.constant([5, 6], tf.int64)).numpy())
    assert not np.array_equal(a, tf.random.stateless_uniform([64], [6, 5]).numpy())


def test_shapes_empty_and_scalar():
    assert tf.random.stateless_uniform([0, 3], [1, 2]).shape.as_list() == [0, 3]
    s = tf.random.stateless_uniform([], [1, 2])
    assert s.shape.as_list() == [] and _bytes(s) == TF["uniform_f32"][2][:8]   # the first element


# ---------------------------------------------------------------- statistics (seeded)
def test_normal_and_truncated_normal_statistics():
    z = tf.random.stateless_normal([200000], [1, 1], dtype=tf.float64).numpy()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    t = tf.random.stateless_truncated_normal([200000], [1, 1]).numpy()
    assert np.all(np.abs(t) < 2)
    # std of N(0, 1) truncated to (-2, 2): sqrt(1 - 2 * 2 phi(2) / (2 Phi(2) - 1))
    phi2 = math.exp(-2) / math.sqrt(2 * math.pi)
    mass = math.erf(2 / math.sqrt(2))
    assert abs(t.std() - math.sqrt(1 - 4 * phi2 / mass)) < 0.005 and abs(t.mean()) < 0.01


def test_uniform_int_covers_range_evenly():
    x = tf.random.stateless_uniform([100000], [2, 3], minval=-3, maxval=7, dtype=tf.int64).numpy()
    counts = np.bincount(x + 3, minlength=10)
    assert x.min() == -3 and x.max() == 6 and np.all(np.abs(counts - 10000) < 500)


@pytest.mark.parametrize("alpha", [0.3, 1.0, 4.5])
def test_gamma_mean_and_variance(alpha):
    x = tf.random.stateless_gamma([100000], [7, 8], alpha=alpha, beta=2.0, dtype=tf.float64).numpy()
    assert abs(x.mean() - alpha / 2) < 0.02 * alpha and abs(x.var() - alpha / 4) < 0.05 * alpha


@pytest.mark.parametrize("lam", [0.7, 9.5, 10.0, 250.0])
def test_poisson_mean_and_variance(lam):
    x = tf.random.stateless_poisson([100000], [7, 8], lam=lam, dtype=tf.int64).numpy()
    assert abs(x.mean() - lam) < 0.02 * lam + 0.01 and abs(x.var() - lam) < 0.05 * lam + 0.02


# ---------------------------------------------------------------- errors (as TF 2.21)
@pytest.mark.parametrize("seed", [[1, 2, 3], 1, [[1, 2]]])
def test_bad_seed_shape(seed):
    with pytest.raises(InvalidArgumentError, match="seed must have shape"):
        tf.random.stateless_uniform([2], seed)
    with pytest.raises(ValueError):
        tf.function(lambda: tf.random.stateless_uniform([2], seed))()


def test_bad_seed_dtype():
    with pytest.raises(InvalidArgumentError):
        tf.random.stateless_normal([2], [1.0, 2.0])
    with pytest.raises(TypeError):
        tf.function(lambda: tf.random.stateless_normal([2], [1.0, 2.0]))()


def test_bad_arguments():
    with pytest.raises(InvalidArgumentError, match="minval < maxval"):
        tf.random.stateless_uniform([2], [1, 2], minval=5, maxval=5, dtype=tf.int32)
    with pytest.raises(ValueError):
        tf.random.stateless_uniform([2], [1, 2], minval=5, dtype=tf.int32)
    with pytest.raises(ValueError):
        tf.random.stateless_uniform([2], [1, 2], dtype=tf.int8)
    with pytest.raises(ValueError):
        tf.random.stateless_uniform([2], [1, 2], minval=1, maxval=4, dtype=tf.uint32)
    with pytest.raises(InvalidArgumentError, match="end with"):
        tf.random.stateless_poisson([6], [4, 5], lam=[1.0, 2.0])
    with pytest.raises(InvalidArgumentError):
        tf.random.stateless_gamma([5], [1, 2], alpha=0.2, dtype=tf.bfloat16)


# ---------------------------------------------------------------- gradients (TF: none through the draw)
def test_gradients_reach_mean_stddev_and_bounds_only():
    x = tf.Variable(2.0)
    with tf.GradientTape() as t:
        y = tf.reduce_sum(tf.random.stateless_normal([3], [1, 2], mean=x, stddev=x))
    z = tf.random.stateless_normal([3], [1, 2]).numpy()
    assert abs(t.gradient(y, x).numpy() - (3 + z.sum())) < 1e-5          # d/dx sum(z x + x)
    seed = tf.constant([1, 2])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(tf.random.stateless_uniform([3], seed, minval=x, maxval=5.0))
    u = tf.random.stateless_uniform([3], [1, 2]).numpy()
    assert abs(t.gradient(y, x).numpy() - (3 - u.sum())) < 1e-5          # d/dx sum(u (5 - x) + x)


# ---------------------------------------------------------------- tf.random.Generator
def test_generator_matches_tf():
    g = tf.random.Generator.from_seed(1)
    assert g.state.numpy().tolist() == [1, 0, 0] and g.algorithm == 1
    # TF 2.21's values and states for the same calls
    assert _bytes(g.uniform([3])) == "4899493f6c03c83eacd3953e"
    assert _bytes(g.normal([2], dtype=tf.float64)) == "8d1b41e4881ff0bf96462199dd50dabf"
    assert _bytes(g.truncated_normal([3])) == "c1b4063f495bc33c06553bbe"
    assert _bytes(g.uniform([2], minval=0, maxval=10, dtype=tf.int32)) == "0100000002000000"
    assert g.state.numpy().tolist() == [256 * (3 + 2 + 3 + 2) + 1, 0, 0]
    assert g.make_seeds(2).numpy().tolist() == [[2470399196295502633, 1832118863539921035], [0, 0]]
    assert [s.state.numpy().tolist() for s in g.split(2)] == [[0, 0, 3061938510242338695],
                                                              [0, 0, 6766078197126147373]]
    assert g.state.numpy().tolist() == [3585, 0, 0]


def test_generator_draws_are_stateless_draws_of_its_state():
    g = tf.random.Generator.from_key_counter(key=7, counter=[11, 0], alg="philox")
    st = philox.stream_from_state([11, 0, 7])
    assert np.array_equal(g.normal([5]).numpy(), philox.normal(st, 5, np.float32))
    assert g.state.numpy().tolist() == [11 + 5 * 256, 0, 7]


def test_create_rng_state():
    assert tf.random.create_rng_state(2 ** 70 + 5, "philox").numpy().tolist() == [5, 64, 0]
    assert tf.random.create_rng_state([5, 6], "philox").numpy().tolist() == [0, 5, 6]
    assert tf.random.Generator.from_seed(2 ** 64 - 1).state.numpy().tolist() == [-1, 0, 0]


def test_generator_in_tf_function_continues_the_eager_sequence():
    a, b = tf.random.Generator.from_seed(42), tf.random.Generator.from_seed(42)
    f = tf.function(lambda: a.normal([3]) + a.uniform([3]))
    for _ in range(2):
        want = b.normal([3]) + b.uniform([3])
        assert _bytes(f()) == _bytes(want)
    assert a.state.numpy().tolist() == b.state.numpy().tolist() == [42 + 4 * 3 * 256, 0, 0]


def test_generator_copy_reset_and_global():
    g = tf.random.Generator.from_seed(5)
    h = tf.random.Generator(copy_from=g)
    assert _bytes(h.uniform([4])) == _bytes(g.uniform([4]))
    g.reset_from_seed(5)
    assert g.state.numpy().tolist() == [5, 0, 0]
    assert _bytes(g.uniform([4])) == _bytes(tf.random.Generator.from_seed(5).uniform([4]))
    tf.random.set_global_generator(tf.random.Generator.from_seed(77))
    assert _bytes(tf.random.get_global_generator().normal([2])) == \
        _bytes(tf.random.Generator.from_seed(77).normal([2]))
    with pytest.raises(NotImplementedError):
        tf.random.Generator.from_seed(1, alg="threefry")


# ---------------------------------------------------------------- stateful gamma / poisson
def test_stateful_gamma_and_poisson_are_tfs_and_continue():
    tf.random.set_seed(11)
    # TF 2.21's values: two eager calls of one op continue its stream
    assert _bytes(tf.random.gamma([2], [0.5, 2.0], seed=3)) == "da320f3e99ff1840be80653f7d2c993f"
    assert _bytes(tf.random.gamma([2], [0.5, 2.0], seed=3)) == "10a7cf3bd3918a3d5e5b283f943d813f"
    tf.random.set_seed(11)
    assert _bytes(tf.random.poisson([3], [1.0, 20.0], seed=5)) == \
        "0000803f000090410000000000009041000000000000a041"
    assert _bytes(tf.random.poisson([3], [1.0, 20.0], seed=5)) == \
        "0000803f000040410000000000008841000000000000a841"
    tf.random.set_seed(None)


# ---------------------------------------------------------------- libm loops
def test_libm_loops_native_and_ctypes_agree(monkeypatch):
    x = np.float32([1e-7, 0.25, 0.5, 0.999, 3.0])
    native = [libm_loops.log_(x), *libm_loops.sincos(x * 2), libm_loops.log_(x.astype(np.float64)),
              libm_loops.pow_(x.astype(np.float64), 0.3), libm_loops.lgamma(x.astype(np.float64))]
    assert libm_loops._native() is not None
    monkeypatch.setattr(libm_loops, "_native", lambda: None)     # the ctypes path
    slow = [libm_loops.log_(x), *libm_loops.sincos(x * 2), libm_loops.log_(x.astype(np.float64)),
            libm_loops.pow_(x.astype(np.float64), 0.3), libm_loops.lgamma(x.astype(np.float64))]
    for a, b in zip(native, slow):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    xd = x.astype(np.float64)
    assert libm_loops.log_(xd).tolist() == [math.log(v) for v in xd]       # Python's math is glibc's too
    assert libm_loops.pow_(xd, 0.3).tolist() == [math.pow(v, 0.3) for v in xd]


# ---------------------------------------------------------------- tf.image.stateless_random_*
IMG = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2) / 48.0


@pytest.mark.parametrize("seed", [[1, 2], [5, 6], [7, 8], [-3, 2 ** 33]])
def test_stateless_image_flips_follow_the_seeded_uniform(seed):
    """Image i of a batch is mirrored when round(u_i) is 1, a single image when u < 0.5, u
    being stateless_uniform's draw for the seed (TF's composition)."""
    u = tf.random.stateless_uniform([2], seed).numpy()
    want = np.stack([IMG[i, :, ::-1] if round(float(u[i])) == 1 else IMG[i] for i in range(2)])
    assert np.array_equal(tf.image.stateless_random_flip_left_right(tf.constant(IMG), seed).numpy(), want)
    u0 = tf.random.stateless_uniform([], seed).numpy()
    want = IMG[0, ::-1] if u0 < 0.5 else IMG[0]
    assert np.array_equal(tf.image.stateless_random_flip_up_down(tf.constant(IMG[0]), seed).numpy(), want)


def test_stateless_image_ops_are_tfs():
    img = tf.constant(IMG)
    # TF 2.21: seed [1, 2] mirrors image 0 and not image 1; brightness delta 0.20643628;
    # the crop's window starts at (0, 1, 1, 0)
    got = tf.image.stateless_random_flip_left_right(img, [1, 2]).numpy()
    assert np.array_equal(got[0], IMG[0, :, ::-1]) and np.array_equal(got[1], IMG[1])
    delta = (tf.image.stateless_random_brightness(img, 0.3, [1, 2]) - img).numpy()
    assert np.all(np.abs(delta - np.float32(0.20643627643585205)) < 1e-6)
    crop = tf.image.stateless_random_crop(img, [1, 2, 3, 2], [1, 2]).numpy()
    assert np.array_equal(crop, IMG[0:1, 1:3, 1:4, :])
    factor = tf.random.stateless_uniform([], [1, 2], minval=0.2, maxval=1.8).numpy()
    mean = IMG.mean(axis=(1, 2), keepdims=True)
    got = tf.image.stateless_random_contrast(img, 0.2, 1.8, [1, 2]).numpy()
    assert np.allclose(got, (IMG - mean) * factor + mean, atol=1e-6)
    with pytest.raises(ValueError):
        tf.image.stateless_random_contrast(img, 0.5, 0.5, [1, 2])
    with pytest.raises(ValueError):
        tf.image.stateless_random_brightness(img, -0.1, [1, 2])


# ---------------------------------------------------------------- stateless_categorical
def test_stateless_categorical_two_equal_classes_is_a_uniform_threshold():
    """Two equal logits: cumulative sums [1, 2]; sample j is class 1 when 2 u_j >= 1, u_j the
    float64 uniform TF builds from words 2j, 2j + 1 (the same words stateless_uniform's
    float64 draw uses)."""
    u = tf.random.stateless_uniform([50], [6, 7], dtype=tf.float64).numpy()
    got = tf.random.stateless_categorical([[0.0, 0.0]], 50, [6, 7]).numpy()
    assert got.dtype == np.int64 and got.tolist() == [(u * 2 >= 1).astype(np.int64).tolist()]


def test_stateless_categorical_values_and_frequencies():
    lg = np.array([[0.0, -np.inf, 1.0, np.inf], [np.nan, 0.5, 0.5, -np.inf]], np.float32)
    # TF 2.21's draws: non-finite logits are never picked
    assert tf.random.stateless_categorical(lg, 6, [3, 3], dtype=tf.int32).numpy().tolist() == \
        [[0, 0, 0, 0, 2, 2], [1, 2, 1, 1, 2, 1]]
    p = np.array([0.2, 0.3, 0.5])
    x = tf.random.stateless_categorical(np.log(p)[None], 20000, [4, 4]).numpy()[0]
    assert np.all(np.abs(np.bincount(x, minlength=3) / 20000 - p) < 0.015)
    with pytest.raises(ValueError):
        tf.random.stateless_categorical(lg, 2, [1, 2], dtype=tf.float32)


# ---------------------------------------------------------------- gamma's gradient with respect to alpha
def _exp_sample_der_alpha(x):
    """dx/dalpha at alpha = 1 by hand: P(a, x) = gamma(a, x) / Gamma(a) has
    dP/da (1, x) = (1 - e^-x)(ln x + Euler's gamma) - Ein(x), Ein(x) = sum_k (-1)^(k+1) x^k / (k k!),
    and the density is e^-x, so dx/da = e^x (Ein(x) - (1 - e^-x)(ln x + Euler's gamma))."""
    euler = 0.57721566490153286061
    ein = math.fsum((-1) ** (k + 1) * x ** k / (k * math.factorial(k)) for k in range(1, 80))
    return math.exp(x) * (ein - (1 - math.exp(-x)) * (math.log(x) + euler))


@pytest.mark.parametrize("x", [0.05, 0.7, 1.0, 2.5, 6.0])
def test_gamma_sample_derivative_at_alpha_one_by_hand(x):
    from jitgrad.ops.gamma_sample_grad import sample_der_alpha
    got = float(sample_der_alpha(np.float64(1.0), np.float64(x)))
    assert abs(got - _exp_sample_der_alpha(x)) <= 1e-12 * max(1.0, abs(got))


def test_gamma_sample_derivative_is_tfs():
    from jitgrad.ops.gamma_sample_grad import sample_der_alpha
    got = sample_der_alpha(np.float64([0.2, 3.0, 40.0, 1.0, 0.5]), np.float64([0.3, 1.0, 2.5, 7.0, 1e-3]))
    # TF 2.21's RandomGammaGrad (float64) for these inputs
    assert _bytes(got) == ("c9077503ca3a01400988bd0e4f85e23fedc85ad0f5bcc73f21ef64feb8320540746b8b3de4768c3f")
    assert sample_der_alpha(np.float64(2.0), np.float64(0.0)) == 0
    assert np.isnan(sample_der_alpha(np.float64(-1.0), np.float64(1.0)))


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_gradients_of_stateless_gamma_reach_alpha_and_beta(mode):
    a = tf.Variable(tf.constant([0.5, 2.0, 7.5], tf.float64))
    b = tf.Variable(tf.constant(1.5, tf.float64))

    def grads():
        with tf.GradientTape() as t:
            y = tf.random.stateless_gamma([4, 3], [1, 2], alpha=a, beta=b, dtype=tf.float64)
            loss = tf.reduce_sum(y * y)
        return t.gradient(loss, [a, b])
    ga, gb = grads() if mode == "eager" else tf.function(grads)()
    # TF 2.21's gradients (float64) for the same program
    assert _bytes(ga) == "7ea5e3095be1ef3fa663d3db1255224084bad1ccf5373940"
    assert _bytes(gb) == "50806009fd1b61c0"
    # and by the chain rule from the raw draws: y = x / b, d(sum y^2)/db = -2 sum(y^2) / b
    y = tf.random.stateless_gamma([4, 3], [1, 2], alpha=a, beta=b, dtype=tf.float64).numpy()
    assert abs(gb.numpy() - (-2 * np.sum(y * y) / 1.5)) < 1e-9


def test_poisson_has_no_gradient():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as t:
        t.watch(x)
        y = tf.reduce_sum(tf.random.stateless_poisson([3, 2], [1, 2], lam=x, dtype=tf.float32))
    assert t.gradient(y, x) is None


def test_stateless_draws_in_a_loop_body_and_a_branch():
    @tf.function
    def loop(n):
        def body(i, acc):
            return i + 1, acc + tf.random.stateless_normal([3], tf.stack([i, 7]))
        return tf.while_loop(lambda i, acc: i < n, body, [tf.constant(0), tf.zeros([3])])[1]
    want = np.zeros(3, np.float32)
    for i in range(5):                   # the same float32 additions, in order
        want = want + tf.random.stateless_normal([3], [i, 7]).numpy()
    assert _bytes(loop(tf.constant(5))) == _bytes(want)
    c = tf.function(lambda flag: tf.cond(flag, lambda: tf.random.stateless_uniform([2], [1, 2]),
                                         lambda: tf.random.stateless_uniform([2], [3, 4])))
    assert _bytes(c(tf.constant(False))) == _bytes(tf.random.stateless_uniform([2], [3, 4]))


def test_negative_shape():
    with pytest.raises(InvalidArgumentError):
        tf.random.stateless_uniform([-1], [1, 2])
    # TF 2.21 in a graph: -1 is an unknown dim to the shape function (the kernel's
    # InvalidArgumentError when it runs), other negatives the shape function's ValueError
    with pytest.raises(InvalidArgumentError):
        tf.function(lambda: tf.random.stateless_uniform([-1], [1, 2]))()
    with pytest.raises(ValueError):
        tf.function(lambda: tf.random.stateless_uniform([-2], [1, 2]))()


# ---------------------------------------------------------------- binomial
def test_stateless_binomial_and_generator_binomial_are_tfs():
    # TF 2.21's draws for the same calls (inversion below n p = 10, rejection above, and
    # count - Binomial(count, 1 - p) for p > 1/2)
    got = tf.random.stateless_binomial([4, 3], [1, 2], counts=[10.0, 100.0, 1000.0], probs=0.3)
    assert got.dtype == tf.int32 and _bytes(got) == (
        "050000001a0000001a010000050000002200000033010000050000001e0000002b010000040000001e00000025010000")
    got = tf.random.stateless_binomial([2, 2, 2], [3, 9], counts=[[5.0], [50.0]], probs=[0.05, 0.6],
                                       output_dtype=tf.float32)
    assert _bytes(got) == "000000000000804000004040000000420000803f000000400000803f0000b841"
    g = tf.random.Generator.from_seed(7)
    assert _bytes(g.binomial([3, 2], counts=[10.0, 40.0], probs=[0.5, 0.25])) == \
        "040000000a0000000400000009000000070000000c000000"
    # the state advances 256 * (batches * 200 * (draws per batch + 3) / 4) = 256 * 600
    assert g.state.numpy().tolist() == [7 + 256 * (2 * 200 * 6 // 4), 0, 0]


def test_binomial_edges_and_statistics():
    got = tf.random.stateless_binomial([3, 4], [3, 9], counts=tf.constant([0.0, 7.0, 20.0, 3.0], tf.float64),
                                       probs=tf.constant([0.5, 0.0, 1.0, 0.99], tf.float64),
                                       output_dtype=tf.int64).numpy()
    assert got[:, :3].tolist() == [[0, 0, 20]] * 3 and np.all((got[:, 3] >= 0) & (got[:, 3] <= 3))
    for n, p in ((12.0, 0.3), (200.0, 0.4), (50.0, 0.9)):
        x = tf.random.stateless_binomial([50000], [4, 4], counts=n, probs=p, output_dtype=tf.float64).numpy()
        assert abs(x.mean() - n * p) < 0.02 * n * p and abs(x.var() - n * p * (1 - p)) < 0.06 * n * p * (1 - p)
    with pytest.raises(InvalidArgumentError, match="end with"):
        tf.random.stateless_binomial([3], [1, 2], counts=[1.0, 2.0], probs=0.5)


def test_generator_state_is_checkpointed(tmp_path):
    g = tf.random.Generator.from_seed(5)
    g.normal([3])
    ck = tf.train.Checkpoint(gen=g)
    path = ck.save(str(tmp_path / "ck"))
    first = g.normal([2]).numpy()
    ck.restore(path)
    again = g.normal([2]).numpy()
    assert np.array_equal(first, again)
    # TF 2.21 draws these after from_seed(5) and a normal([3])
    assert first.tolist() == [-1.6569936275482178, 0.9840722680091858]


def test_generator_in_a_dataset_map_draws_tfs_sequence():
    g = tf.random.Generator.from_seed(9)
    ds = tf.data.Dataset.range(3).map(lambda i: tf.cast(i, tf.float32) + g.uniform([]))
    got = [float(x) for x in ds]
    # TF 2.21's values: one uniform per element, from the Generator's sequence
    assert got == [0.8203654289245605, 1.6102410554885864, 2.368814468383789]
