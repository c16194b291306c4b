"""The Keras optimizers against TensorFlow 2.21 (Keras 3) itself: each expected array is
what TF printed for 4 steps of ``loss = sum(w^3 - 2w) + sum(w)^2`` from W0 (the loop of
test_optimizers.check_keras_optimizer, eager, float32), run once with the benchmark
venv's TensorFlow on this machine. Bit-identical except Adamax and AdamW (TF's pow is not
correctly rounded: within 2e-7 relative)."""
import numpy as np
import pytest

import jitgrad as tf

from test_optimizers import STEPS, W0, tf_loss

O = tf.keras.optimizers
TF_2_21 = [
    ("rmsprop_centered", lambda: O.RMSprop(0.01, rho=0.8, momentum=0.5, centered=True), True,
     [[float.fromhex('0x1.933a5c0000000p-2'), float.fromhex('-0x1.a211ae0000000p+0'), float.fromhex('0x1.ded0c40000000p+0')], [float.fromhex('0x1.c16e240000000p-1'), float.fromhex('0x1.42dd800000000p-3'), float.fromhex('-0x1.c153460000000p-1')]]),
    ("rmsprop_default", lambda: O.RMSprop(), True,
     [[float.fromhex('0x1.f6d1ba0000000p-2'), float.fromhex('-0x1.8252e80000000p+0'), float.fromhex('0x1.fdae600000000p+0')], [float.fromhex('0x1.fb61720000000p-1'), float.fromhex('0x1.edb8720000000p-3'), float.fromhex('-0x1.84a19c0000000p-1')]]),
    ("adagrad", lambda: O.Adagrad(0.2, initial_accumulator_value=0.5), True,
     [[float.fromhex('0x1.271f840000000p-1'), float.fromhex('-0x1.09ec340000000p+1'), float.fromhex('0x1.8aec800000000p+0')], [float.fromhex('0x1.8677440000000p-1'), float.fromhex('0x1.c107880000000p-2'), float.fromhex('-0x1.39ba4a0000000p+0')]]),
    ("nadam", lambda: O.Nadam(0.05), True,
     [[float.fromhex('0x1.8f96b40000000p-2'), float.fromhex('-0x1.a969bc0000000p+0'), float.fromhex('0x1.d83ef40000000p+0')], [float.fromhex('0x1.b75fea0000000p-1'), float.fromhex('0x1.60a0fc0000000p-3'), float.fromhex('-0x1.cdfa3a0000000p-1')]]),
    ("amsgrad", lambda: O.Adam(0.1, amsgrad=True), True,
     [[float.fromhex('0x1.4ac1240000000p-2'), float.fromhex('-0x1.e650cc0000000p+0'), float.fromhex('0x1.9c08b40000000p+0')], [float.fromhex('0x1.52ffec0000000p-1'), float.fromhex('0x1.434d4c0000000p-3'), float.fromhex('-0x1.22a5340000000p+0')]]),
    ("clipnorm", lambda: O.SGD(0.05, clipnorm=2.0), True,
     [[float.fromhex('0x1.dff7b00000000p-2'), float.fromhex('-0x1.b951b80000000p+0'), float.fromhex('0x1.b0d3ba0000000p+0')], [float.fromhex('0x1.d203920000000p-1'), float.fromhex('0x1.deaeae0000000p-3'), float.fromhex('-0x1.9ff74c0000000p-1')]]),
    ("gclip", lambda: O.SGD(0.05, global_clipnorm=3.0), True,
     [[float.fromhex('0x1.dc40b60000000p-2'), float.fromhex('-0x1.dcc3ce0000000p+0'), float.fromhex('0x1.8e1fb20000000p+0')], [float.fromhex('0x1.c0ab2e0000000p-1'), float.fromhex('0x1.e7f5c20000000p-3'), float.fromhex('-0x1.acf5b60000000p-1')]]),
    ("clipvalue", lambda: O.SGD(0.05, clipvalue=1.5), True,
     [[float.fromhex('0x1.b642800000000p-2'), float.fromhex('-0x1.ccccd00000000p+0'), float.fromhex('0x1.b333300000000p+0')], [float.fromhex('0x1.7aec800000000p-1'), float.fromhex('0x1.00ebea0000000p-2'), float.fromhex('-0x1.0ccccc0000000p+0')]]),
    ("sgd_wd", lambda: O.SGD(0.05, weight_decay=0.1), True,
     [[float.fromhex('0x1.7108e80000000p-1'), float.fromhex('-0x1.01af7e0000000p+2'), float.fromhex('0x1.190d6e0000000p+0')], [float.fromhex('0x1.d56a300000000p-1'), float.fromhex('0x1.25332e0000000p-1'), float.fromhex('-0x1.904d340000000p-1')]]),
    ("adamax", lambda: O.Adamax(0.05), False,
     [[float.fromhex('0x1.7418760000000p-2'), float.fromhex('-0x1.b2bad20000000p+0'), float.fromhex('0x1.d0595e0000000p+0')], [float.fromhex('0x1.aac40e0000000p-1'), float.fromhex('0x1.12c2d40000000p-3'), float.fromhex('-0x1.dc42000000000p-1')]]),
    ("adamw", lambda: O.AdamW(0.1, weight_decay=0.5), False,
     [[float.fromhex('0x1.22a4a80000000p-2'), float.fromhex('-0x1.966fc40000000p+0'), float.fromhex('0x1.470d2e0000000p+0')], [float.fromhex('0x1.10bf4c0000000p-1'), float.fromhex('0x1.3e36ac0000000p-3'), float.fromhex('-0x1.e3a18a0000000p-1')]]),
]


@pytest.mark.parametrize("name,make,bit_identical,expected", TF_2_21, ids=[c[0] for c in TF_2_21])
def test_matches_tensorflow(name, make, bit_identical, expected):
    w = tf.Variable(W0)
    opt = make()
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf_loss(w)
        opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    expected = np.array(expected, np.float32)
    if bit_identical:
        np.testing.assert_array_equal(w.numpy(), expected)
    else:
        np.testing.assert_allclose(w.numpy(), expected, rtol=2e-7, atol=0)
