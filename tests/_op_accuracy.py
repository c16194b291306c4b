"""Accuracy checks shared by the elementwise math-op tests (hyperbolic, inverse trig): a
compiled Session over generated inputs against the long-double reference in both
flush-denormals modes, and the interpreter's kernel agreeing with it in class (NaN, inf
with sign, zero with sign)."""
import os
import sys

import numpy as np

from jitgrad import denormals

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _jit_harness as H  # noqa: E402
from _graph_testing import run_graph  # noqa: E402


def assert_compiled_within_ulp(op, name, xs, dtype, bound, denormal_results_flush=False):
    """``op(*xs)`` compiled, whole and as 7 rows, within ``bound`` ulp of ``H.reference(name)``:
    off, every value; on (the default mode), after flushing denormal inputs and results.
    ``denormal_results_flush``: a result of normal inputs can be denormal (atan2), and FTZ
    flushes it by the unrounded value, so the reference is flushed the same way."""
    size = xs[0].size
    for flush in (False, True):
        denormals.set_enabled(flush)
        for shape in [(size,), (7, size // 7)]:
            cut = [x[: int(np.prod(shape))].reshape(shape) for x in xs]
            (got,) = run_graph(lambda *ps: [op(*ps)], cut, "compiled")
            assert got.dtype == dtype and got.shape == shape
            got, rs = got.ravel(), [x.ravel() for x in cut]
            if flush:
                got, rs = denormals.flush(got), [denormals.flush(r) for r in rs]
            ref = H.reference(name, *rs)
            if flush and denormal_results_flush:
                tiny = np.finfo(dtype).smallest_normal
                ref = np.where(np.abs(ref) < tiny, np.copysign(H.LD(0), ref), ref)
            err = H.ulp_error(got, ref, dtype)
            w = int(np.argmax(err))
            assert err[w] <= bound, (flush, [r[w] for r in rs], got[w], err[w])


def assert_interpreter_agrees_in_class(op, xs):
    """numpy's kernel (the interpreter) and the compiled code: NaN where the other has NaN, the
    same infinities, zeros of the same sign."""
    (want,) = run_graph(lambda *ps: [op(*ps)], xs, "interpret")
    (got,) = run_graph(lambda *ps: [op(*ps)], xs, "compiled")
    assert np.array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf])
    zero = want == 0
    assert np.array_equal(got[zero] == 0, np.ones(zero.sum(), bool))
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
