"""Gradients through complex tensors, with TF's convention: for a real loss L of a
complex z, tf.gradients / GradientTape give dL/dRe(z) + i dL/dIm(z) (checked by
central finite differences on the real and imaginary parts), and a holomorphic
op passes grad * conj(f'(z)) back (checked by hand). Graph mode runs compiled
and interpreted (the graph_mode fixture); eager mode uses the tape."""
import numpy as np
import pytest

import jitgrad as tf

Z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j], np.complex128)
W = np.array([0.5 - 1j, 2 + 0.5j, -1 + 1j], np.complex128)


def _fd_grad(f, z, eps=1e-6):
    """dL/dRe + i dL/dIm of a real-valued numpy function, by central differences."""
    out = np.zeros_like(z)
    for k in range(z.size):
        e = np.zeros_like(z)
        e[k] = eps
        d_re = (f(z + e) - f(z - e)) / (2 * eps)
        d_im = (f(z + 1j * e) - f(z - 1j * e)) / (2 * eps)
        out[k] = d_re + 1j * d_im
    return out


# (name, jitgrad loss of z, the same loss in numpy); each loss is real
REAL_LOSSES = [
    ("abs_squared", lambda z: tf.reduce_sum(tf.math.real(z * tf.math.conj(z))),
     lambda z: np.sum((z * np.conj(z)).real)),
    ("abs", lambda z: tf.reduce_sum(tf.abs(z)), lambda z: np.sum(np.abs(z))),
    ("real_of_product", lambda z: tf.reduce_sum(tf.math.real(z * tf.constant(W))), lambda z: np.sum((z * W).real)),
    ("imag_of_quotient", lambda z: tf.reduce_sum(tf.math.imag(tf.constant(W) / z)), lambda z: np.sum((W / z).imag)),
    ("abs_of_square_plus", lambda z: tf.reduce_sum(tf.abs(z * z + tf.constant(W) - z)),
     lambda z: np.sum(np.abs(z * z + W - z))),
    ("broadcast_scalar_times", lambda z: tf.abs(tf.reduce_sum(z * tf.constant(2 - 1j, tf.complex128))),
     lambda z: np.abs(np.sum(z * (2 - 1j)))),
    ("cast_to_real", lambda z: tf.reduce_sum(tf.cast(z, tf.float64) ** 2), lambda z: np.sum(z.real ** 2)),
]


@pytest.mark.parametrize("name,loss,ref", REAL_LOSSES, ids=[c[0] for c in REAL_LOSSES])
def test_real_loss_gradient_eager(name, loss, ref):
    z = tf.constant(Z)
    with tf.GradientTape() as tape:
        tape.watch(z)
        out = loss(z)
    g = tape.gradient(out, z)
    assert g.dtype == tf.complex128
    np.testing.assert_allclose(g.numpy(), _fd_grad(ref, Z), rtol=1e-6, atol=1e-8)


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("name,loss,ref", REAL_LOSSES, ids=[c[0] for c in REAL_LOSSES])
def test_real_loss_gradient_graph(name, loss, ref):
    g = tf.Graph()
    with g.as_default():
        z = tf.compat.v1.placeholder(tf.complex128, [3])
        (grad,) = tf.gradients(loss(z), [z])
        with tf.compat.v1.Session() as s:
            got = s.run(grad, {z: Z})
    np.testing.assert_allclose(got, _fd_grad(ref, Z), rtol=1e-6, atol=1e-8)


def test_abs_squared_is_two_z_as_in_tf():
    # TF: tf.gradients(z * conj(z)) = 2z (the Mul rule multiplies by the other operand's conjugate)
    z = tf.constant(np.array([1 + 2j, 3 - 1j], np.complex64))
    with tf.GradientTape() as tape:
        tape.watch(z)
        loss = tf.math.real(z * tf.math.conj(z))
    np.testing.assert_allclose(tape.gradient(loss, z).numpy(), [2 + 4j, 6 - 2j], rtol=1e-6)


def test_holomorphic_output_gradient_is_conjugated_derivative():
    # y = z^2 / w: upstream ones -> conj(dy/dz) = conj(2z / w); for w: conj(-z^2 / w^2)
    z, w = tf.constant(Z), tf.constant(W)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([z, w])
        y = z * z / w
    np.testing.assert_allclose(tape.gradient(y, z).numpy(), np.conj(2 * Z / W), rtol=1e-12)
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), np.conj(-Z ** 2 / W ** 2), rtol=1e-12)


def test_gradient_to_real_parts_through_tf_complex():
    x = tf.constant([3.0, 0.0])
    y = tf.constant([4.0, 0.0])
    with tf.GradientTape() as tape:
        tape.watch([x, y])
        r = tf.abs(tf.complex(x, y))          # |x + iy|
    gx, gy = tape.gradient(r, [x, y])
    # d|z|/dx = x / |z|, d|z|/dy = y / |z|; at 0 TF's ComplexAbs gradient is 0 (div_no_nan)
    np.testing.assert_allclose(gx.numpy(), [0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), [0.8, 0.0], rtol=1e-6)
    assert gx.dtype == tf.float32


def test_complex_gradient_in_a_function():
    @tf.function
    def grad_of_abs(z):
        with tf.GradientTape() as tape:
            tape.watch(z)
            loss = tf.reduce_sum(tf.abs(z))
        return tape.gradient(loss, z)

    np.testing.assert_allclose(grad_of_abs(tf.constant(Z)).numpy(), Z / np.abs(Z), rtol=1e-12)


def test_ops_without_complex_support_still_reject_complex():
    # TF 2.21's Erf and Softplus take real floats only (eager: InvalidArgumentError, as here)
    for fn in (tf.math.erf, tf.nn.softplus):
        with pytest.raises(tf.errors.InvalidArgumentError):
            fn(tf.constant(Z))
