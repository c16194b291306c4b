"""Every eager example of document 004 prints what the document prints."""
import io
from contextlib import redirect_stdout

import numpy as np
import pytest

from jitgrad.seeds import eager_examples as E


@pytest.mark.parametrize("name,fn,expected", E.EXAMPLES, ids=[e[0] for e in E.EXAMPLES])
def test_prints_match_document(name, fn, expected):
    buf = io.StringIO()
    with redirect_stdout(buf):
        fn()
    assert buf.getvalue().rstrip("\n") == expected


def test_output_gradients_bits():
    grad, grad2 = _quiet(E.output_gradients)
    assert grad.numpy().dtype == np.float32
    assert f"{grad.numpy()}" == "29.09999656677246"   # TF's tape order: 27 + 1.05 + 1.05 in float32
    assert float(grad2.numpy()) == 51.0


def test_output_gradients_order_matters():
    # The document's number depends on the summation order TF's tape uses; other orders differ.
    f = np.float32
    dz = f(f(f(0.1) * f(2)) + f(f(f(0.5) * f(0.1)) / f(5)))  # 0.21: AddN(Mul grad, SqrtGrad)
    part = f(dz * f(5))
    s = f(f(0.9) * f(3)) * f(10)
    tf_order = f(f(f(s) + part) + part)
    assert f"{tf_order}" == "29.09999656677246"
    assert f(f(part + part) + s) != tf_order  # e.g. graph-mode-like order gives another float32


def test_minimum_search_final_value_and_trajectory():
    final, vals = _quiet(E.minimum_search)
    assert f"{final}" == "1.9999998807907104"
    assert len(vals) == 50 and vals[0] < vals[-1]


def test_higher_order_values():
    d1, d2 = _quiet(E.higher_order)
    assert f"{d1}" == "48.0" and f"{d2}" == "24.0"


def _quiet(fn):
    with redirect_stdout(io.StringIO()):
        return fn()
