"""tf.data transformations beyond the basics (jitgrad/data_transforms.py): expected
elements, specs and cardinalities written out by hand (from TF 2.21's documented
behaviour, checked against it) or computed with plain Python."""
import collections

import numpy as np
import pytest

import jitgrad as tf

D = tf.data.Dataset


def _np(ds):
    return [_plain(e) for e in ds.as_numpy_iterator()]


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    return np.asarray(x).tolist()


def _card(ds):
    return int(ds.cardinality())


def _windows(ds):
    """A dataset of windows as lists of (structures of) lists."""
    def one(w):
        if isinstance(w, dict):
            return {k: one(v) for k, v in w.items()}
        if isinstance(w, tuple):
            return tuple(one(v) for v in w)
        return _np(w)
    return [one(w) for w in ds]


def _ragged(n):
    """Elements [1], [2, 2], [3, 3, 3], ... (int64), whose shape jitgrad only sees when built."""
    return D.range(1, n + 1).map(lambda x: tf.fill([x], x))


# ---------------------------------------------------------------- padded_batch
def test_padded_batch_pads_to_the_batch_max():
    ds = _ragged(4).padded_batch(2)
    assert _np(ds) == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    assert ds.element_spec == tf.TensorSpec([None, None], tf.int64)
    assert _card(ds) == 2
    dropped = _ragged(5).padded_batch(2, drop_remainder=True)
    assert dropped.element_spec == tf.TensorSpec([2, None], tf.int64) and _card(dropped) == 2
    assert len(_np(dropped)) == 2
    # scalars batch as batch() does
    assert _np(D.range(3).padded_batch(2)) == [[0, 1], [2]]


def test_padded_batch_explicit_shapes_and_values():
    ds = _ragged(3).padded_batch(3, padded_shapes=[4], padding_values=np.int64(-1))
    assert _np(ds) == [[[1, -1, -1, -1], [2, 2, -1, -1], [3, 3, 3, -1]]]
    assert ds.element_spec == tf.TensorSpec([None, 4], tf.int64)
    assert _np(_ragged(2).padded_batch(2, padded_shapes=[-1])) == [[[1, 0], [2, 2]]]
    # a static shape stays known; a padded shape may be larger than it
    rows = D.from_tensor_slices(np.arange(6).reshape(3, 2))
    assert rows.padded_batch(2).element_spec == tf.TensorSpec([None, 2], tf.int64)
    wide = rows.padded_batch(2, padded_shapes=[4])
    assert _np(wide) == [[[0, 1, 0, 0], [2, 3, 0, 0]], [[4, 5, 0, 0]]]
    # 2-d: the first dimension to the max, the second to 4
    grid = D.range(1, 4).map(lambda x: tf.fill([x, 4 - x], x)).padded_batch(3, padded_shapes=[None, 4])
    expected = np.zeros((3, 3, 4), np.int64)
    for x in (1, 2, 3):
        expected[x - 1, :x, :4 - x] = x
    assert _np(grid) == [expected.tolist()]
    assert grid.element_spec == tf.TensorSpec([None, None, 4], tf.int64)


def test_padded_batch_nested_structures():
    ds = D.range(1, 4).map(lambda x: (tf.fill([x], x), {"f": tf.fill([x], tf.cast(x, tf.float32)), "n": x}))
    got = _np(ds.padded_batch(2, padding_values=(np.int64(-5), {"f": -1.0, "n": np.int64(0)})))
    assert got == [([[1, -5], [2, 2]], {"f": [[1.0, -1.0], [2.0, 2.0]], "n": [1, 2]}),
                   ([[3, 3, 3]], {"f": [[3.0, 3.0, 3.0]], "n": [3]})]
    spec = ds.padded_batch(2, padded_shapes=([5], {"f": [None], "n": []})).element_spec
    assert spec == (tf.TensorSpec([None, 5], tf.int64),
                    {"f": tf.TensorSpec([None, None], tf.float32), "n": tf.TensorSpec([None], tf.int64)})
    # None for one component: its default (0)
    pair = D.range(1, 3).map(lambda x: (tf.fill([x], x), tf.fill([x], tf.cast(x, tf.float32))))
    assert _np(pair.padded_batch(2, padding_values=(np.int64(7), None))) == [([[1, 7], [2, 2]],
                                                                               [[1.0, 0.0], [2.0, 2.0]])]
    strings = D.from_generator(lambda: iter([["a"], ["b", "c"]]), output_signature=tf.TensorSpec([None], tf.string))
    assert _np(strings.padded_batch(2)) == [[[b"a", b""], [b"b", b"c"]]]
    assert _np(strings.padded_batch(2, padding_values="?")) == [[[b"a", b"?"], [b"b", b"c"]]]


def test_padded_batch_errors():
    rows = D.from_tensor_slices(np.arange(6).reshape(3, 2))
    with pytest.raises(ValueError, match="not compatible"):
        rows.padded_batch(2, padded_shapes=[1])
    with pytest.raises(TypeError, match="padding_values"):
        _ragged(2).padded_batch(2, padding_values=-1)          # a Python int is int32, the data int64
    with pytest.raises(tf.errors.DataLossError):
        list(_ragged(4).padded_batch(2, padded_shapes=[3]))     # the 4th element needs 4
    with pytest.raises(tf.errors.InvalidArgumentError):
        _ragged(2).padded_batch(0)


# ---------------------------------------------------------------- flat_map / interleave / window
def test_flat_map():
    ds = D.range(4).flat_map(lambda x: D.range(x))
    assert _np(ds) == [0, 0, 1, 0, 1, 2]
    assert _card(ds) == tf.data.UNKNOWN_CARDINALITY
    pairs = D.from_tensor_slices(([1, 2], [10, 20])).flat_map(lambda a, b: D.from_tensors(a + b).repeat(2))
    assert _np(pairs) == [11, 11, 22, 22]
    # the spec is the inner datasets'
    rows = D.range(1, 3).flat_map(lambda x: D.from_tensor_slices(tf.reshape(tf.range(x * 2), [x, 2])))
    assert rows.element_spec == tf.TensorSpec([2], tf.int64)
    with pytest.raises(TypeError, match="Dataset"):
        list(D.range(2).flat_map(lambda x: x))


def test_interleave_order():
    # TF's documented example: 2 open at once, 4 elements from each in turn
    ds = D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6), cycle_length=2, block_length=4)
    assert _np(ds) == [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]
    # datasets of different lengths: an exhausted one's place goes to the next input when its turn comes
    ragged = D.range(1, 6).interleave(lambda x: D.range(x), cycle_length=3, block_length=2)
    assert _np(ragged) == [0, 0, 1, 0, 1, 0, 1, 2, 2, 3, 0, 1, 2, 3, 4]
    parallel = D.range(1, 6).interleave(lambda x: D.range(x), cycle_length=3, block_length=2,
                                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    assert _np(parallel) == _np(ragged)
    assert _np(D.range(3).interleave(lambda x: D.range(10 * x, 10 * x + 3), cycle_length=5, block_length=2)) == \
        [0, 1, 10, 11, 20, 21, 2, 12, 22]
    one = D.range(3).interleave(lambda x: D.range(10 * x, 10 * x + 2), cycle_length=1, block_length=3)
    assert _np(one) == [0, 1, 10, 11, 20, 21]
    assert _card(ds) == tf.data.UNKNOWN_CARDINALITY


def test_window():
    ds = D.range(7).window(3, shift=2)
    assert _windows(ds) == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
    assert ds.element_spec == tf.data.DatasetSpec(tf.TensorSpec([], tf.int64))
    assert isinstance(next(iter(ds)), D)
    assert _card(ds) == 4
    dropped = D.range(7).window(3, shift=2, drop_remainder=True)
    assert _windows(dropped) == [[0, 1, 2], [2, 3, 4], [4, 5, 6]] and _card(dropped) == 3
    strided = D.range(10).window(3, shift=4, stride=2, drop_remainder=True)
    assert _windows(strided) == [[0, 2, 4], [4, 6, 8]] and _card(strided) == 2
    # a shift past the window skips input elements
    assert _windows(D.range(10).window(2, shift=5)) == [[0, 1], [5, 6]]
    # cardinality against a count in plain Python, for short inputs
    for n in range(6):
        for size, shift, stride, drop in [(2, 1, 2, True), (3, 2, 1, False), (2, 3, 1, True), (1, 1, 3, False)]:
            span = (size - 1) * stride + 1
            starts = [s for s in range(0, n, shift) if not drop or s + span <= n]
            w = D.range(n).window(size, shift, stride, drop)
            assert _card(w) == len(starts) == len(list(w))


def test_window_of_structures_and_the_batch_idiom():
    ds = D.from_tensor_slices(([1, 2, 3], [4, 5, 6])).window(2)
    assert _windows(ds) == [([1, 2], [4, 5]), ([3], [6])]
    assert ds.element_spec == (tf.data.DatasetSpec(tf.TensorSpec([], tf.int32)),) * 2
    d = D.from_tensor_slices({"a": [1, 2, 3]}).window(2, 1)
    assert _windows(d) == [{"a": [1, 2]}, {"a": [2, 3]}, {"a": [3]}]
    # sliding windows as batches
    sliding = D.range(6).window(3, 1, drop_remainder=True).flat_map(lambda w: w.batch(3))
    assert _np(sliding) == [[i, i + 1, i + 2] for i in range(4)]
    assert sliding.element_spec == tf.TensorSpec([None], tf.int64)
    zipped = D.from_tensor_slices(([1, 2, 3, 4], [5, 6, 7, 8])).window(2).flat_map(
        lambda a, b: D.zip((a.batch(2), b.batch(2))))
    assert _np(zipped) == [([1, 2], [5, 6]), ([3, 4], [7, 8])]
    assert zipped.element_spec == (tf.TensorSpec([None], tf.int32),) * 2
    assert _card(D.range(3).repeat().window(2)) == tf.data.INFINITE_CARDINALITY


# ---------------------------------------------------------------- scan / reduce / single element
def test_scan():
    ds = D.range(5).scan(np.int64(0), lambda s, x: (s + x, s * 2))
    sums = [0, 0, 1, 3, 6]                      # the state before each element
    assert _np(ds) == [2 * s for s in sums] and _card(ds) == 5
    # the element is one argument, tuple or not; the state may be a structure
    pairs = D.from_tensor_slices(([1, 2], [3, 4])).scan(0, lambda s, x: (s + 1, x))
    assert _np(pairs) == [(1, 3), (2, 4)]
    st = D.range(4).scan({"n": np.int64(0), "s": np.int64(0)},
                         lambda s, x: ({"n": s["n"] + 1, "s": s["s"] + x}, s["s"] * 10 + x))
    assert _np(st) == [0, 1, 12, 33]
    with pytest.raises(TypeError, match="types for the new state"):
        list(D.range(3).scan(0, lambda s, x: (tf.cast(s, tf.int64) + x, x)))


def test_reduce_and_get_single_element():
    assert int(D.range(5).reduce(np.int64(0), lambda s, x: s + x)) == 10
    assert int(D.from_tensor_slices(([1, 2], [3, 4])).reduce(0, lambda s, x: s + x[0] * x[1])) == 11
    d = D.range(4).reduce({"a": np.int64(0), "b": np.int64(1)}, lambda s, x: {"a": s["a"] + x, "b": s["b"] * (x + 1)})
    assert _plain(d) == {"a": 6, "b": 24}
    assert int(D.range(0).reduce(np.int64(7), lambda s, x: s + x)) == 7
    assert int(D.range(1).get_single_element()) == 0
    one = D.from_tensors(([1, 2], {"a": 3})).get_single_element()
    assert _plain(one) == ([1, 2], {"a": 3})
    with pytest.raises(tf.errors.InvalidArgumentError, match="empty"):
        D.range(0).get_single_element()
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than one"):
        D.range(2).get_single_element()


# ---------------------------------------------------------------- selections and sources
def test_shard_take_while_unique():
    for n, k, i in [(10, 3, 1), (10, 3, 2), (7, 7, 0), (3, 5, 4)]:
        ds = D.range(n).shard(k, i)
        assert _np(ds) == list(range(n))[i::k] and _card(ds) == len(range(n)[i::k])
    assert _card(D.range(3).repeat().shard(2, 0)) == tf.data.INFINITE_CARDINALITY
    assert _np(D.range(10).filter(lambda x: x > 2).shard(2, 0)) == [3, 5, 7, 9]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Index must be between 0 and 2"):
        D.range(10).shard(3, 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="greater than zero"):
        D.range(10).shard(0, 0)
    tw = D.range(10).take_while(lambda x: x < 4)
    assert _np(tw) == [0, 1, 2, 3] and _card(tw) == tf.data.UNKNOWN_CARDINALITY
    assert _np(D.from_tensor_slices(([1, 2, 3], [3, 2, 1])).take_while(lambda a, b: a < b)) == [(1, 3)]
    u = D.from_tensor_slices([1, 1, 2, 3, 2, 5]).unique()
    assert _np(u) == [1, 2, 3, 5] and _card(u) == tf.data.UNKNOWN_CARDINALITY
    assert _np(D.from_tensor_slices(["a", "b", "a"]).unique()) == [b"a", b"b"]
    with pytest.raises(TypeError, match="does not support type"):
        D.from_tensor_slices([1.0, 1.0]).unique()
    with pytest.raises(tf.errors.InvalidArgumentError, match="single component"):
        D.from_tensor_slices(([1], [2])).unique()


def test_counter_and_random():
    c = D.counter(3, 2)
    assert _card(c) == tf.data.INFINITE_CARDINALITY and c.element_spec == tf.TensorSpec([], tf.int64)
    assert _np(c.take(3)) == [3, 5, 7] and _np(D.counter(5, -2).take(4)) == [5, 3, 1, -1]
    assert D.counter(dtype=tf.int32).element_spec == tf.TensorSpec([], tf.int32)
    r = D.random(seed=4)
    assert _card(r) == tf.data.INFINITE_CARDINALITY and r.element_spec == tf.TensorSpec([], tf.int64)
    a = _np(r.take(2000))
    assert a == _np(D.random(seed=4).take(2000)) == _np(r.take(2000))   # seeded; the same each iteration
    assert min(a) >= 0 and max(a) < 2 ** 32
    assert abs(np.mean(a) / 2 ** 32 - 0.5) < 0.05                        # uniform: the mean's sd is ~0.0065


def test_choose_from_datasets():
    a, b = D.range(0, 3), D.range(100, 105)
    choice = D.from_tensor_slices(np.array([0, 1, 1, 0, 0, 0, 1], np.int64))
    ds = D.choose_from_datasets([a, b], choice)
    assert _np(ds) == [0, 100, 101, 1, 2]                                # a runs out: stop
    assert _np(D.choose_from_datasets([a, b], choice, stop_on_empty_dataset=False)) == [0, 100, 101, 1, 2, 102]
    assert _card(ds) == tf.data.UNKNOWN_CARDINALITY
    # infinite if any input is (TF's rule, whatever the choices)
    assert _card(D.choose_from_datasets([a.repeat(), b], choice)) == tf.data.INFINITE_CARDINALITY
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        list(D.choose_from_datasets([a, b], D.from_tensor_slices(np.array([0, 2], np.int64))))
    with pytest.raises(TypeError, match="tf.int64"):
        D.choose_from_datasets([a, b], D.from_tensor_slices(np.array([0, 1], np.int32)))
    with pytest.raises(TypeError, match="compatible element specs"):
        D.choose_from_datasets([a, D.range(3).map(lambda x: tf.cast(x, tf.int32))], choice)


def test_sample_from_datasets_statistics():
    a, b = D.from_tensors(np.int64(0)).repeat(), D.from_tensors(np.int64(1)).repeat()
    ds = D.sample_from_datasets([a, b], weights=[0.25, 0.75], seed=7)
    draws = np.array(_np(ds.take(4000)))
    # binomial: 3000 expected ones, sd ~27
    assert abs(draws.sum() - 3000) < 150
    assert _card(ds) == tf.data.INFINITE_CARDINALITY
    assert _np(ds.take(50)) == _np(D.sample_from_datasets([a, b], weights=[0.25, 0.75], seed=7).take(50))
    # finite inputs: every element once, each input's in its order
    x, y = D.range(0, 5), D.range(100, 110)
    mixed = _np(D.sample_from_datasets([x, y], seed=3))
    assert sorted(mixed) == list(range(5)) + list(range(100, 110))
    assert [v for v in mixed if v < 100] == list(range(5))
    assert _card(D.sample_from_datasets([x, y])) == tf.data.UNKNOWN_CARDINALITY
    stopped = _np(D.sample_from_datasets([x, y], seed=3, stop_on_empty_dataset=True))
    # each input's elements in order, up to the first draw of one that had run out
    assert [v for v in stopped if v < 100] == list(range(5))[:len([v for v in stopped if v < 100])]
    assert [v for v in stopped if v >= 100] == list(range(100, 100 + len([v for v in stopped if v >= 100])))
    assert 4 in stopped or 109 in stopped
    with pytest.raises(ValueError, match="weights"):
        D.sample_from_datasets([x, y], weights=[1.0])


def test_options():
    o = tf.data.Options()
    assert o.deterministic is None and o == tf.data.Options()
    o.experimental_deterministic = False
    o.threading.private_threadpool_size = 3
    o2 = tf.data.Options()
    o2.autotune.enabled = False
    ds = D.range(3).with_options(o).with_options(o2)
    got = ds.options()
    assert (got.deterministic, got.threading.private_threadpool_size, got.autotune.enabled) == (False, 3, False)
    assert ds.map(lambda x: x + 1).batch(2).options().deterministic is False   # kept through transformations
    assert _np(ds) == [0, 1, 2] and _card(ds) == 3
    assert D.range(3).options() == tf.data.Options()
    with pytest.raises(AttributeError):
        o.no_such_option = 1
    assert tf.data.AUTOTUNE == tf.data.experimental.AUTOTUNE == -1


def test_rebatch_and_specs_of_existing_transformations():
    assert _np(D.range(10).batch(4).rebatch(3)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert D.range(10).batch(4).rebatch(3).element_spec == tf.TensorSpec([None], tf.int64)
    P = collections.namedtuple("P", "x y")
    z = D.zip(P(D.range(3), D.range(3).batch(2)))
    assert z.element_spec == P(tf.TensorSpec([], tf.int64), tf.TensorSpec([None], tf.int64))
    assert D.range(3).enumerate().element_spec == (tf.TensorSpec([], tf.int64),) * 2
    # after a map jitgrad guesses the shapes, but batch's dimension is still TF's (unknown)
    mapped = D.zip((D.range(5), D.range(5).map(lambda x: x * 2))).batch(2)
    assert mapped.element_spec == (tf.TensorSpec([None], tf.int64),) * 2
    assert D.range(5).map(lambda x: x).filter(lambda x: x > 0).batch(2).element_spec == \
        tf.TensorSpec([None], tf.int64)
    assert _card(D.range(3).repeat().bucket_by_sequence_length(lambda x: x, [1], [2, 2], no_padding=True)) == \
        tf.data.INFINITE_CARDINALITY


def test_bucket_by_sequence_length():
    lengths = [5, 1, 3, 7, 2, 4, 6, 2, 8, 1, 3]
    seqs = D.from_generator(lambda: iter([[n] * n for n in lengths]), output_signature=tf.TensorSpec([None], tf.int32))

    def padded(rows, width=None, pad=0):
        width = width or max(rows)
        return [[n] * n + [pad] * (width - n) for n in rows]
    # buckets: < 3, [3, 6), >= 6; a batch leaves when its bucket has 2; the rest at the end, by bucket
    ds = seqs.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [2, 2, 2])
    assert _np(ds) == [padded([5, 3]), padded([1, 2]), padded([7, 6]), padded([2, 1]), padded([4, 3]), padded([8])]
    assert ds.element_spec == tf.TensorSpec([None, None], tf.int32) and _card(ds) == tf.data.UNKNOWN_CARDINALITY
    dropped = seqs.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [2, 2, 2], drop_remainder=True,
                                             padding_values=-1)
    assert _np(dropped) == [padded(b, pad=-1) for b in ([5, 3], [1, 2], [7, 6], [2, 1], [4, 3])]
    # padded to the bucket's boundary - 1; the part-filled buckets [3] and [8] in bucket order
    to_edge = seqs.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6, 9], [2, 3, 2, 1],
                                             pad_to_bucket_boundary=True)
    assert _np(to_edge) == [padded([1, 2], 2), padded([5, 3, 4], 5), padded([7, 6], 8), padded([2, 1], 2),
                            padded([3], 5), padded([8], 8)]
    with pytest.raises(tf.errors.InternalError, match="pad_to_bucket_boundary"):
        list(seqs.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [2, 2, 2],
                                            pad_to_bucket_boundary=True))
    plain = D.range(10).bucket_by_sequence_length(lambda x: tf.cast(x % 3, tf.int32), [1, 2], [2, 2, 2],
                                                  no_padding=True)
    assert _np(plain) == [[0, 3], [1, 4], [2, 5], [6, 9], [7], [8]]
    with pytest.raises(ValueError, match="bucket_batch_sizes"):
        seqs.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [2, 2])


def test_keras_fit_on_padded_batches():
    # ragged sequences padded into batches train a model; the steps are the batches' count
    x = D.from_generator(lambda: iter([[1.0] * n for n in (1, 3, 2, 4)]), output_signature=tf.TensorSpec([None],
                                                                                                         tf.float32))
    y = D.from_tensor_slices(np.array([1.0, 3.0, 2.0, 4.0], np.float32))
    ds = D.zip((x, y)).padded_batch(2, padded_shapes=([4], []))
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    with pytest.raises(TypeError, match="as_numpy_iterator"):
        list(D.range(3).window(2).as_numpy_iterator())
