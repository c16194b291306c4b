"""denormal_scan.py: the native one-pass test flush() makes before numpy's.

Expected answers come from numpy ((|a| < tiny) & (a != 0)).any(), on random bit
patterns (every exponent, both signs, zeros, inf, NaN) and on each boundary word;
arrays the scan must not read (non-contiguous, unaligned, other types) answer
"maybe" or are refused, and flush() gives numpy's result either way.
"""
import numpy as np
import pytest

from jitgrad import denormal_scan, denormals

SCAN = denormal_scan.get()
pytestmark = pytest.mark.skipif(SCAN is None, reason="no native denormal scan on this host")
WORDS = {np.float32: (np.uint32, 0x7FFFFF, 0x80000000), np.float64: (np.uint64, 0xFFFFFFFFFFFFF, 1 << 63)}


def _numpy_has(a):
    return bool(((np.abs(a) < np.finfo(a.dtype).tiny) & (a != 0)).any())


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_scan_answers_as_numpy_on_random_and_boundary_words(dt):
    uint, mant, sign = WORDS[dt]
    has = SCAN[np.dtype(dt)]
    rng = np.random.default_rng(0)
    boundary = np.array([0, 1, mant, mant + 1, sign, sign | 1, sign | mant, sign | (mant + 1)], uint)
    for word in boundary:
        a = np.array([1.0, word.view(dt), 2.0], dt)
        assert has(a) == _numpy_has(a), hex(int(word))
    for n in (0, 1, 7, 64, 1001):
        bits = rng.integers(0, np.iinfo(uint).max, size=n, dtype=uint, endpoint=True)
        bits[rng.random(n) < 0.5] &= sign | mant                   # half of them: exponent 0
        a = bits.view(dt)
        clean = np.where(((np.abs(a) < np.finfo(dt).tiny) & (a != 0)), dt(0), a).astype(dt)
        for arr in (a, clean, clean.reshape(1, n, 1)) + ((a[:1].copy().reshape(()),) if n else ()):
            assert has(arr) == _numpy_has(arr)


def test_arrays_it_must_not_scan_answer_maybe_or_are_refused():
    has = SCAN[np.dtype(np.float32)]
    x = np.ones((4, 4), np.float32)
    assert has(x.T[1:]) and has(x[:, 1])                           # not C-contiguous: maybe
    raw = np.zeros(4 * 8 + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, 8, offset=1)
    assert not unaligned.flags.aligned and has(unaligned)
    class Sub(np.ndarray):
        pass

    for other in ([1.0], np.float32(1.0), np.ones(2, np.float32).view(Sub)):
        with pytest.raises(SystemError):
            has(other)


def test_an_array_of_another_dtype_or_byte_order_answers_maybe_unread():
    """Each builtin scans only its own dtype in native byte order. Without that check the
    float64 scan read a float32[3]'s 12 bytes as 24 (past the buffer), and these arrays,
    each holding a denormal (numpy says so), answered False: 'holds none'."""
    f32, f64 = SCAN[np.dtype(np.float32)], SCAN[np.dtype(np.float64)]
    as64 = np.array([0.0, 5e-324])                  # float32 words 0, 0 where the f32 scan looks
    swapped = np.array([1e-40], np.dtype(">f4"))    # byte-swapped: a normal float32 word natively
    assert _numpy_has(as64) and _numpy_has(swapped)
    assert f32(as64) is True and f32(swapped) is True
    assert f64(np.zeros(3, np.float32)) is True and f64(np.array([1e-310], ">f8")) is True
    assert f32(np.zeros(3, np.float32)) is False and f64(np.zeros(3)) is False   # (own dtype: scanned)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_flush_gives_numpys_result_with_and_without_the_scan(dt, monkeypatch):
    tiny = np.finfo(dt).tiny
    base = np.array([[0.0, -0.0, tiny / 4, -tiny / 4], [1.0, np.nan, -np.inf, tiny]], dt)
    cases = [base, base.T, base[:, 1:3], base[1], np.ones(5, dt), np.array(dt(-tiny / 8)),
             base.astype(base.dtype.newbyteorder())]                # (big-endian: not flushed, as before)
    with_scan = [denormals.flush(c) for c in cases]
    monkeypatch.setattr(denormals, "_native", [denormals.scope("Mul", []), None])
    without = [denormals.flush(c) for c in cases]
    for c, a, b in zip(cases, with_scan, without):
        assert a.dtype == b.dtype and a.shape == b.shape
        bits = [np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in (a, b)]
        assert np.array_equal(*bits)
        if not _numpy_has(c):
            assert a is c                                          # nothing to flush: no copy
