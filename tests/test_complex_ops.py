"""Complex64 / complex128 through the elementwise math ops, tf.math.angle, reduce_mean, cumsum
and tf.linalg.matmul (transpose / adjoint), with TF's gradient convention: for a real loss L of a
complex z the gradient is dL/dRe(z) + i dL/dIm(z), so a holomorphic op passes
grad * conj(f'(z)) back (TF's math_grad.py).

Expected numbers come from three independent places: numpy for values; TF 2.21 for first and
second derivatives (GRAD, GRAD2, MATMUL_*: computed in /work/benchenv with tf.GradientTape,
eager, complex128, by the script in _tf_reference below, printed to 12 significant digits);
and central finite differences of the real and imaginary parts. Graph mode runs interpreted and
compiled (the graph_mode fixture): the compiled path has no lowering for complex dtypes and falls
back to the interpreter, which test_compiled_run_falls_back_and_explain_says_why checks.
"""
import numpy as np
import pytest

import jitgrad as tf
from _graph_testing import session

Z = np.array([0.5 + 0.3j, -1.2 + 0.7j, 0.8 - 1.1j], np.complex128)   # off every branch cut
W = np.array([1.0 - 0.5j, 0.25 + 2.0j, -0.75 + 0.5j], np.complex128)  # weights of the real loss
V = np.array([0.3 + 1.0j, -1.0 + 0.2j, 0.6 - 0.4j], np.complex128)    # weights of the gradient's loss
WR = np.array([1.0, -2.0, 0.5])                                        # for ops with a real output

OPS = {"exp": (tf.exp, np.exp), "log": (tf.math.log, np.log), "sin": (tf.sin, np.sin),
       "cos": (tf.cos, np.cos), "tanh": (tf.tanh, np.tanh), "sqrt": (tf.sqrt, np.sqrt),
       "reciprocal": (tf.math.reciprocal, lambda z: 1 / z), "rsqrt": (tf.math.rsqrt, lambda z: 1 / np.sqrt(z)),
       "expm1": (tf.math.expm1, np.expm1), "log1p": (tf.math.log1p, np.log1p), "tan": (tf.math.tan, np.tan),
       "sigmoid": (tf.sigmoid, lambda z: 1 / (1 + np.exp(-z))), "square": (tf.square, np.square)}
REAL_OUT = {"abs": (tf.abs, np.abs), "real": (tf.math.real, np.real), "imag": (tf.math.imag, np.imag),
            "angle": (tf.math.angle, np.angle)}
ALL = {**OPS, **REAL_OUT}

# TF 2.21: tape.gradient(loss(name, z), z) at Z (see _tf_reference)
GRAD = {
    'exp': [1.81869881562+0.300311344504j, -0.330477767256-0.509240739325j, 0.234586677867-1.99231220831j],
    'log': [1.02941176471+1.61764705882j, 0.569948186528+1.33419689119j, -0.621621621622+0.22972972973j],
    'sin': [0.844373448421+0.604680231338j, -1.30035426459-1.08639785976j, -1.35091847733+0.137367100432j],
    'cos': [-0.634782829795+0.016660709191j, 0.842224016748-2.27101347379j, 0.432414183643+1.296376889j],
    'tanh': [0.692329552861+0.641904533475j, -0.6273190758-0.319272066919j, -0.28953089973+0.858902735727j],
    'sqrt': [0.543635970753+0.490298898503j, 0.846694478282-0.11904340511j, -0.383803817323-0.0451120817661j],
    'reciprocal': [-0.0865051903114-3.28719723183j, 0.838277537652+0.622835512363j,
                   0.132213294375-0.468955441928j],
    'rsqrt': [-0.366847987723-1.20070658964j, 0.483265798115-0.381107886492j, 0.192792618271-0.208699747915j],
    'expm1': [1.81869881562+0.300311344504j, -0.330477767256-0.509240739325j, 0.234586677867-1.99231220831j],
    'log1p': [0.576923076923+0.448717948718j, 2.54716981132+1.08490566038j, -0.426966292135-0.0168539325843j],
    'tan': [1.28152926118+0.191069943176j, 2.42849008324+1.49518782856j, 0.153169637346-0.366479180399j],
    'sigmoid': [0.230512608779+0.13743936553j, -0.101657515701-0.377860271561j, -0.249507235762-0.0326880129076j],
    'square': [1.3-0.1j, -3.4+4.45j, -0.1-2.45j],
    'abs': [0.857492925713+0.514495755428j, 1.7275578018-1.00774205105j, 0.294085848838-0.404368042152j],
    'real': [1+0j, -2+0j, 0.5+0j],
    'imag': [0+1j, 0-2j, 0+0.5j],
    'angle': [-0.882352941176+1.47058823529j, 0.725388601036+1.24352331606j, 0.297297297297+0.216216216216j],
}
# TF 2.21: the gradient of reduce_sum(real(GRAD(z) * V)) wrt z, from nested tapes
GRAD2 = {
    'exp': [0.245298300181+1.90879221897j, 0.432325915121+0.443145185873j, -0.656172876605-1.28922199613j],
    'log': [3.26124567474-1.07266435986j, -0.962844640125-0.455180004832j, -0.108254200146-0.334258582907j],
    'sin': [-0.20709555813-0.629784617038j, -0.38802132199+2.43945827714j, 0.777999265786+0.604860459943j],
    'cos': [0.351368196811-1.02577751782j, -1.51763383654-0.826327006843j, 0.755604246227-0.622787651192j],
    'tanh': [0.0089734046538-1.08520414971j, 1.25272502253+0.607837645801j, 0.107405911397-1.64574808313j],
    'sqrt': [0.545326096662-0.363529982307j, -0.203522110408+0.238880523057j, 0.0160978358983-0.101168448029j],
    'reciprocal': [-11.484836149-2.60024424995j, -1.52750214667+0.132409577501j, 0.491121947367+0.160353779638j],
    'rsqrt': [-3.36813567373+0.160298489605j, -0.119704921787+0.667029178686j, 0.159578958021+0.159960612829j],
    'expm1': [0.245298300181+1.90879221897j, 0.432325915121+0.443145185873j, -0.656172876605-1.28922199613j],
    'log1p': [0.267915844839-0.420775805391j, -1.80313278747+3.43360626557j, 0.0666330008837-0.129983587931j],
    'tan': [1.17642136997+1.16293988009j, -0.113234092396+8.31395606821j, 0.528111629921-0.231252584j],
    'sigmoid': [-0.0214707038635-0.0776703919821j, 0.0144418027901+0.25387336561j, 0.12061850203+0.0412349264956j],
    'square': [-0.4+2.3j, 0.3+4.1j, -1.3+0j],
    'abs': [0.892801457948-1.48800242991j, 0.490817372013+0.841401209165j, 0.21420577368+0.155786017222j],
    'angle': [2.16262975779+2.17993079585j, -1.0040538001-0.32967327982j, -0.120964207451+0.152812271731j],
}
SECOND_ORDER = sorted(GRAD2)
TF_RTOL = 1e-10   # the TF numbers carry 12 significant digits


def _tf_reference():
    """How GRAD / GRAD2 / MATMUL_* were made (run with /work/benchenv/bin/python and
    `import tensorflow as tf`; the same code under jitgrad prints the same digits):

        for name in ALL:
            z = tf.constant(Z)
            with tf.GradientTape() as t2:
                t2.watch(z)
                with tf.GradientTape() as t1:
                    t1.watch(z)
                    l = loss(name, z)
                g = t1.gradient(l, z)                       # GRAD[name]
                l2 = tf.reduce_sum(tf.math.real(g * V))
            t2.gradient(l2, z)                              # GRAD2[name]
        # matmul: the inputs of _matmul_inputs, y = tf.linalg.matmul(a, b, **kw),
        # _matmul_loss(y); tape.gradient(l, [a, b])       # MATMUL_*
    printed with "%.12g%+.12gj" per element."""


def loss(name, z):
    """A real loss of f(z) whose upstream gradient is not all ones."""
    y = ALL[name][0](z)
    return tf.reduce_sum(tf.math.real(y * tf.cast(WR if name in REAL_OUT else W, y.dtype)))


def np_loss(name, z):
    if name in REAL_OUT:
        return np.sum(REAL_OUT[name][1](z) * WR)
    return np.sum((OPS[name][1](z) * W).real)


def fd_grad(f, z, eps=1e-6):
    """dL/dRe(z) + i dL/dIm(z) of a real-valued function of a complex array, by central differences."""
    out = np.zeros_like(z)
    for k in range(z.size):
        e = np.zeros_like(z)
        e.flat[k] = eps
        out.flat[k] = (f(z + e) - f(z - e)) / (2 * eps) + 1j * (f(z + 1j * e) - f(z - 1j * e)) / (2 * eps)
    return out


def _graph_grads(name, z_value):
    """Loss, its gradient and the gradient's own gradient, from one graph run in the current mode."""
    g = tf.Graph()
    with g.as_default():
        z = tf.compat.v1.placeholder(tf.complex128, [3])
        lo = loss(name, z)
        (gz,) = tf.gradients(lo, [z])
        fetches = {"loss": lo, "grad": gz}
        if name in GRAD2:
            (fetches["grad2"],) = tf.gradients(tf.reduce_sum(tf.math.real(gz * V)), [z])
    return session(g).run(fetches, {z: z_value})


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name", sorted(ALL))
def test_value_eager_matches_numpy(name, dtype):
    tf_fn, np_fn = ALL[name]
    z = Z.astype(dtype)
    got = tf_fn(tf.constant(z)).numpy()
    want = np_fn(z)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.complex64 else 1e-14)


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_values_graph_match_numpy(dtype):
    z = Z.astype(dtype)
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.as_dtype(dtype), [3])
        ys = {name: fn(p) for name, (fn, _) in ALL.items()}
    got = session(g).run(ys, {p: z})
    for name, (_, np_fn) in ALL.items():
        want = np_fn(z)
        assert got[name].dtype == want.dtype, name
        np.testing.assert_allclose(got[name], want, rtol=2e-6 if dtype == np.complex64 else 1e-14, err_msg=name)


def test_special_values_propagate_like_numpy():
    z = np.array([0j, complex(np.inf, 0), complex(np.nan, 1), complex(-np.inf, np.inf), -1 + 0j], np.complex128)
    for name in ("exp", "log", "sqrt", "tanh", "sin", "reciprocal"):
        tf_fn, np_fn = OPS[name]
        with np.errstate(all="ignore"):
            want = np_fn(z)
        if name == "reciprocal":
            # TF 2.21 scales a divisor by max(|re|, |im|) first: 0 and infinite divisors give
            # 0 / 0 and inf / inf (nan), where numpy's Smith division gives inf + nan j and 0
            want = np.where(np.isfinite(z) & (z != 0), want, complex(np.nan, np.nan))
        np.testing.assert_array_equal(tf_fn(tf.constant(z)).numpy(), want, err_msg=name)


def test_sign_of_complex_is_z_over_abs_and_has_zero_gradient():
    z = tf.constant(np.array([3 + 4j, 0j, -2j], np.complex64))
    with tf.GradientTape() as tape:
        tape.watch(z)
        s = tf.sign(z)
        lo = tf.reduce_sum(tf.math.real(s * tf.constant(np.complex64(1 + 1j))))
    np.testing.assert_allclose(s.numpy(), [0.6 + 0.8j, 0, -1j], rtol=1e-6)   # z / |z|, 0 at 0 (TF too)
    np.testing.assert_array_equal(tape.gradient(lo, z).numpy(), np.zeros(3, np.complex64))


# ---------------------------------------------------------------- first and second derivatives
@pytest.mark.parametrize("name", sorted(ALL))
def test_gradient_eager_matches_tf_and_finite_differences(name):
    z = tf.constant(Z)
    with tf.GradientTape(persistent=True) as t2:
        t2.watch(z)
        with tf.GradientTape() as t1:
            t1.watch(z)
            lo = loss(name, z)
        g = t1.gradient(lo, z)
        l2 = tf.reduce_sum(tf.math.real(g * V))
    assert g.dtype == tf.complex128
    np.testing.assert_allclose(g.numpy(), GRAD[name], rtol=TF_RTOL, atol=1e-12)
    np.testing.assert_allclose(g.numpy(), fd_grad(lambda v: np_loss(name, v), Z), rtol=1e-7, atol=1e-9)
    if name in GRAD2:
        np.testing.assert_allclose(t2.gradient(l2, z).numpy(), GRAD2[name], rtol=TF_RTOL, atol=1e-11)


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("name", sorted(ALL))
def test_gradient_graph_matches_tf(name):
    out = _graph_grads(name, Z)
    np.testing.assert_allclose(out["loss"], np_loss(name, Z), rtol=1e-14)
    np.testing.assert_allclose(out["grad"], GRAD[name], rtol=TF_RTOL, atol=1e-12)
    if name in GRAD2:
        np.testing.assert_allclose(out["grad2"], GRAD2[name], rtol=TF_RTOL, atol=1e-11)


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivative_matches_finite_differences_of_the_gradient(name):
    # the directional loss of the first gradient, reduce_sum(real(grad(z) * V)), differentiated
    # numerically: independent of every second-order rule
    def grad_loss(v):
        return np.sum((_graph_grads(name, v)["grad"] * V).real)
    np.testing.assert_allclose(_graph_grads(name, Z)["grad2"], fd_grad(grad_loss, Z), rtol=1e-6, atol=1e-8)


def test_upstream_ones_give_the_conjugated_derivative():
    # tf.gradients(f(z), z) with grad_ys ones: conj(f'(z)), derived by hand
    derivs = {"exp": np.exp, "log": lambda z: 1 / z, "sin": np.cos, "cos": lambda z: -np.sin(z),
              "tanh": lambda z: 1 - np.tanh(z) ** 2, "sqrt": lambda z: 0.5 / np.sqrt(z),
              "reciprocal": lambda z: -1 / z ** 2, "rsqrt": lambda z: -0.5 * z ** -1.5}
    g = tf.Graph()
    with g.as_default():
        z = tf.constant(Z)
        grads = {name: tf.gradients(y, z, grad_ys=tf.ones_like(y))[0]
                 for name, y in ((name, OPS[name][0](z)) for name in derivs)}
        with pytest.raises(TypeError, match="must set grad_ys"):     # as TF: no default for complex ys
            tf.gradients(tf.exp(z), z)
    got = session(g).run(grads)
    for name, d in derivs.items():
        np.testing.assert_allclose(got[name], np.conj(d(Z)), rtol=1e-13, err_msg=name)


def test_complex64_gradient_matches_complex128():
    z64 = tf.constant(Z.astype(np.complex64))
    for name in ("exp", "log", "sin", "tanh", "sqrt", "reciprocal", "angle"):
        with tf.GradientTape() as tape:
            tape.watch(z64)
            lo = loss(name, z64)
        g = tape.gradient(lo, z64)
        assert g.dtype == tf.complex64
        np.testing.assert_allclose(g.numpy(), GRAD[name], rtol=1e-5, err_msg=name)


# ---------------------------------------------------------------- angle, mean, cumsum
def test_angle_of_real_input_is_pi_where_negative():
    # TF composes it for real input: where(x < 0, pi, 0) (tf.math.angle([-2., 0., 3.]) = [pi, 0, 0])
    got = tf.math.angle(tf.constant([-2.0, 0.0, 3.0, np.nan])).numpy()
    np.testing.assert_array_equal(got, np.array([np.pi, 0, 0, 0], np.float32))
    assert got.dtype == np.float32


def test_angle_on_the_negative_real_axis_is_pi():
    got = tf.math.angle(tf.constant(np.array([-1 + 0j, -0.0 - 0j, 1j], np.complex128))).numpy()
    np.testing.assert_array_equal(got, np.angle(np.array([-1 + 0j, -0.0 - 0j, 1j])))


@pytest.mark.usefixtures("graph_mode")
def test_reduce_mean_and_cumsum_of_complex():
    x = (Z[:, None] * np.array([1, 2j, -0.5])).astype(np.complex64)      # 3 x 3
    g = tf.Graph()
    with g.as_default():
        p = tf.compat.v1.placeholder(tf.complex64, [3, 3])
        m, c = tf.reduce_mean(p, axis=1), tf.math.cumsum(p, axis=0, reverse=True)
        lo = tf.reduce_sum(tf.math.real(m * W.astype(np.complex64))) + tf.reduce_sum(tf.math.imag(c))
        (gp,) = tf.gradients(lo, [p])
    out = session(g).run({"m": m, "c": c, "g": gp}, {p: x})
    np.testing.assert_allclose(out["m"], x.mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(out["c"], np.cumsum(x[::-1], axis=0)[::-1], rtol=1e-6)
    # dL/dRe + i dL/dIm: real(m_i W_i) gives conj(W_i) / 3 per element of row i; imag(c_i) (c_i the
    # sum of rows i..2) gives i per row k >= i, so row k gets i (k + 1)
    want = np.repeat(np.conj(W)[:, None] / 3, 3, axis=1) + 1j * np.arange(1, 4)[:, None]
    np.testing.assert_allclose(out["g"], want.astype(np.complex64), rtol=1e-6)


# ---------------------------------------------------------------- matmul
MATMUL_adjoint_a_adjoint_b = (
    [-1.39174447617+2.87026046988j, -3.23417337733+7.37023860701j, 5.42221688692-3.42114489061j,
     13.4241791464-8.25874719707j, -1.50911784322+7.42393319386j, -1.82832845409+15.6562942848j],
    [3.11092154643-4.33397926441j, -2.33330091257+0.824789973861j, 4.64070653646+0.941745513461j,
     4.32904635863-4.50927597788j, -2.5965195337+0.293888330433j, 5.40668795816+1.60510970531j,
     5.54717117083-4.68457269135j, -2.85973815482-0.237013312994j, 6.17266937985+2.26847389717j,
     6.76529598303-4.85986940482j, -3.12295677595-0.767914956421j, 6.93865080155+2.93183808902j])
MATMUL_batch_transpose_a = (
    [-0.591461080381-1.24931672165j, 1.8573105405-4.74103801143j, -5.4635138782-1.50420893918j,
     -13.7719929512-1.30565437208j, -0.235585896977-1.45476850849j, 1.35996734564-1.54552834382j,
     -5.08780408621+35.563140388j, -6.78145071702+49.210071673j, 14.3895084119-5.9983593545j,
     21.2093381785-8.35713766854j, 1.50170212808-11.7361560167j, 2.29166837947-16.2511252029j],
    [-3.35911583851-6.34073071867j, -4.23346312021-7.725683392j, -5.10781040191-9.11063606533j,
     -5.9821576836-10.4955887387j, -2.44310933473-2.10201565499j, -2.51464358678-2.03640309657j,
     -2.58617783884-1.97079053815j, -2.65771209089-1.90517797973j, 2.33593079684+3.67443877867j,
     2.07867715738+4.9286033503j, 1.82142351793+6.18276792193j, 1.56416987847+7.43693249357j,
     3.06206457738+16.8812233031j, 3.24918276518+18.2916922087j, 3.43630095298+19.7021611142j,
     3.62341914078+21.1126300198j, 10.0807968009+1.84079048914j, 11.0395573049+1.8307100527j,
     11.9983178089+1.82062961627j, 12.9570783128+1.81054917983j, -0.804716784238-14.0989158142j,
     -0.970698353937-15.6037555426j, -1.13667992364-17.108595271j, -1.30266149333-18.6134349994j])


def _matmul_inputs():
    rng = np.random.default_rng(7)   # the TF numbers above were made from these same draws

    def cx(*s):
        return rng.uniform(-1, 1, s) + 1j * rng.uniform(-1, 1, s)
    return cx(3, 2), cx(4, 3), cx(2, 3, 2), cx(2, 3, 4)


def _matmul_loss(y):
    n = int(np.prod(y.shape.as_list()))
    weights = np.arange(1, n + 1).reshape(y.shape.as_list()) * (1 - 0.5j)
    return tf.reduce_sum(tf.math.real(y * weights))


def _np_op(x, transpose, adjoint):
    x = np.swapaxes(x, -1, -2) if transpose or adjoint else x
    return np.conj(x) if adjoint else x


# a transposed or adjoint, b as is, transposed or adjoint
FLAGS = [(ta, aa, tb, ab) for ta, aa in [(True, False), (False, True)] for tb, ab in [(False, False), (True, False),
                                                                                        (False, True)]]


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("batched", [False, True], ids=["rank2", "batched"])
@pytest.mark.parametrize("ta,aa,tb,ab", FLAGS)
def test_matmul_flags_values_and_gradients(batched, ta, aa, tb, ab):
    a2, b2, a3, b3 = _matmul_inputs()
    a = a3 if batched else a2                   # (..., 3, 2): always op'd to (..., 2, 3)
    b = b3 if batched else b2.T.copy()          # (..., 3, 4)
    if tb or ab:
        b = np.swapaxes(b, -1, -2).copy()       # (..., 4, 3): op'd back to (..., 3, 4)
    g = tf.Graph()
    with g.as_default():
        pa = tf.compat.v1.placeholder(tf.complex128, a.shape)
        pb = tf.compat.v1.placeholder(tf.complex128, b.shape)
        y = tf.linalg.matmul(pa, pb, transpose_a=ta, adjoint_a=aa, transpose_b=tb, adjoint_b=ab)
        lo = _matmul_loss(y)
        ga, gb = tf.gradients(lo, [pa, pb])
    sess = session(g)
    out = sess.run({"y": y, "ga": ga, "gb": gb}, {pa: a, pb: b})
    np.testing.assert_allclose(out["y"], np.matmul(_np_op(a, ta, aa), _np_op(b, tb, ab)), rtol=1e-13)
    np.testing.assert_allclose(out["ga"], fd_grad(lambda v: sess.run(lo, {pa: v, pb: b}), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(out["gb"], fd_grad(lambda v: sess.run(lo, {pa: a, pb: v}), b), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", ["adjoint_a_adjoint_b", "batch_transpose_a"])
def test_matmul_gradients_match_tf(case):
    a2, b2, a3, b3 = _matmul_inputs()
    a, b, kw, want = {"adjoint_a_adjoint_b": (a2, b2, dict(adjoint_a=True, adjoint_b=True),
                                              MATMUL_adjoint_a_adjoint_b),
                      "batch_transpose_a": (a3, b3, dict(transpose_a=True), MATMUL_batch_transpose_a)}[case]
    a, b = tf.constant(a), tf.constant(b)
    with tf.GradientTape() as tape:
        tape.watch([a, b])
        lo = _matmul_loss(tf.linalg.matmul(a, b, **kw))
    ga, gb = tape.gradient(lo, [a, b])
    np.testing.assert_allclose(ga.numpy().ravel(), want[0], rtol=TF_RTOL)
    np.testing.assert_allclose(gb.numpy().ravel(), want[1], rtol=TF_RTOL)


def test_matmul_rejects_transpose_and_adjoint_together():
    a = tf.constant(np.eye(2, dtype=np.complex64))
    with pytest.raises(ValueError, match="Only one of `transpose_a` and `adjoint_a`"):
        tf.linalg.matmul(a, a, transpose_a=True, adjoint_a=True)
    with pytest.raises(ValueError, match="Only one of `transpose_b` and `adjoint_b`"):
        tf.linalg.matmul(a, a, transpose_b=True, adjoint_b=True)


def test_real_matmul_adjoint_is_transpose():
    a = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    got = tf.linalg.matmul(tf.constant(a), tf.constant(a), adjoint_a=True).numpy()
    np.testing.assert_array_equal(got, a.T @ a)


# ---------------------------------------------------------------- the compiled path
def test_compiled_run_falls_back_and_explain_says_why():
    g = tf.Graph()
    with g.as_default():
        z = tf.compat.v1.placeholder(tf.complex64, [3])
        y = tf.exp(tf.matmul(tf.reshape(z, [3, 1]), tf.reshape(z, [3, 1]), adjoint_a=True))   # exp(z^H z)
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))
    feed = {z: Z.astype(np.complex64)}
    before = tf.cache_info()["fallbacks"]
    got = sess.run(y, feed)
    assert tf.cache_info()["fallbacks"] == before + 1
    np.testing.assert_allclose(got, np.exp(np.vdot(Z, Z)).reshape(1, 1).astype(np.complex64), rtol=1e-6)
    assert "FALLBACK to the interpreter: dtypes without a lowering: complex64" in str(sess.explain(y, feed))


def test_batching_rule_keeps_a_transposed_complex_matmul_unconjugated():
    # Jacobians / hessians batch a MatMul of two batched operands into BatchMatMulV2, whose flags
    # are adjoints: each row must still be the plain transpose product MatMul computes
    from jitgrad.batched_gradients import _Ctx, _rule_matmul
    rng = np.random.default_rng(3)
    a = rng.normal(size=(2, 3, 2)) + 1j * rng.normal(size=(2, 3, 2))
    b = rng.normal(size=(2, 4, 3)) + 1j * rng.normal(size=(2, 4, 3))
    g = tf.Graph()
    with g.as_default():
        op = tf.linalg.matmul(tf.constant(a[0]), tf.constant(b[0]), transpose_a=True, transpose_b=True).op
        (rows,) = _rule_matmul(_Ctx(g, 2), op, [tf.constant(a), tf.constant(b)], (True, True))
    np.testing.assert_allclose(session(g).run(rows), np.swapaxes(a, 1, 2) @ np.swapaxes(b, 1, 2), rtol=1e-13)


# ---------------------------------------------------------------- the API sweep's fixes
# Two complex inputs with zeros where the *_no_nan ops mask (X[1, 1] = 0, Y[0, 1] = 0)
X2 = np.array([[0.5 + 0.3j, -1.2 + 0.7j], [0.8 - 1.1j, 0.0 + 0.0j]], np.complex128)
Y2 = np.array([[1.0 - 0.5j, 0.0 + 0.0j], [-0.75 + 0.5j, 0.3 + 1.0j]], np.complex128)
W2 = np.array([[1.0 - 1.0j, 2.0j], [0.5 + 0.0j, -1.0 + 0.25j]], np.complex128)
SWEEP = {
    "squared_difference": lambda x, y: tf.math.squared_difference(x, y),
    "multiply_no_nan": lambda x, y: tf.math.multiply_no_nan(x, y),
    "divide_no_nan": lambda x, y: tf.math.divide_no_nan(x, y),
    "reduce_prod": lambda x, y: tf.reduce_prod(x * y + 1, axis=1, keepdims=True),
    "norm": lambda x, y: tf.norm(x + y),
    "norm_axis": lambda x, y: tf.norm(x - y, axis=1, keepdims=True),
    "matvec_adjoint": lambda x, y: tf.expand_dims(tf.linalg.matvec(x, y[0], adjoint_a=True), 0),
}
# TF 2.21 (eager, tape; printed "%.12g%+.12gj"): the value, then the gradients wrt x and y of
# _sweep_loss. TF's MulNoNan and SquaredDifference gradients conjugate nothing (math_grad.py), so
# theirs are not dL/dRe + i dL/dIm of a complex weighting and get no finite-difference check.
SWEEP_TF = {
    'squared_difference': ([0.89+0j, 1.93+0j, 4.9625+0j, 1.09+0j],
        [-2.6+0.6j, 2.8+4.8j, 1.55-1.6j, 0.1+2.15j],
        [2.6-0.6j, -2.8-4.8j, -1.55+1.6j, -0.1-2.15j]),
    'multiply_no_nan': ([0.65+0.05j, 0+0j, -0.05+1.225j, 0+0j],
        [1.5+0.5j, 0+0j, -0.375+0.25j, -0.05-1.075j],
        [0.2+0.8j, 1.4+2.4j, 0.4-0.55j, 0-0j]),
    'divide_no_nan': ([0.28+0.44j, 0+0j, -1.41538461538+0.523076923077j, 0+0j],
        [1.2+0.4j, 0+0j, -0.461538461538+0.307692307692j, -0.045871559633-0.98623853211j],
        [-0.512+0.416j, 0+0j, -0.814201183432+0.194082840237j, 0-0j]),
    'reduce_prod': ([1.65+0.05j, 0.95+1.225j],
        [0.5+1.5j, 0+0j, -0.375-0.25j, -0.47-0.65875j],
        [0.8+0.2j, -0.92-3.11j, 0.4+0.55j, 0-0j]),
    'norm': ([2.38170107276+0j],
        [0.629801958421-0.0839735944562j, -0.503841566737+0.293907580597j, 0.020993398614-0.251920783368j,
         0.125960391684+0.419867972281j],
        [0.629801958421-0.0839735944562j, -0.503841566737+0.293907580597j, 0.020993398614-0.251920783368j,
         0.125960391684+0.419867972281j]),
    'norm_axis': ([1.67928556237+0j, 2.46018292003+0j],
        [-0.297745667088+0.47639306734j, -0.71458960101+0.416843933923j, 0.315017226439-0.325179072453j,
         -0.060971076085-0.203236920283j],
        [0.297745667088-0.47639306734j, 0.71458960101-0.416843933923j, -0.315017226439+0.325179072453j,
         0.060971076085+0.203236920283j]),
    'matvec_adjoint': ([0.35-0.55j, -1.55-0.1j],
        [0.5-1.5j, 1+2j, 0-0j, 0+0j],
        [1.6+3.2j, 1.9-0.3j, 0+0j, 0+0j]),
}
SWEEP_HOLDS_CONVENTION = ["divide_no_nan", "reduce_prod", "norm", "norm_axis", "matvec_adjoint"]


def _sweep_loss(out):
    out = tf.reshape(out, [-1, 1]) if len(out.shape) < 2 else out
    rows, cols = out.shape.as_list()
    return tf.reduce_sum(tf.math.real(out * tf.cast(W2[:rows, :cols], out.dtype)))


@pytest.mark.usefixtures("graph_mode")
@pytest.mark.parametrize("name", sorted(SWEEP))
def test_sweep_ops_match_tf(name):
    g = tf.Graph()
    with g.as_default():
        x, y = tf.constant(X2), tf.constant(Y2)
        out = SWEEP[name](x, y)
        gx, gy = tf.gradients(_sweep_loss(out), [x, y])
    got = session(g).run([out, gx, gy])
    for a, want in zip(got, SWEEP_TF[name]):
        np.testing.assert_allclose(np.ravel(a), want, rtol=TF_RTOL, atol=1e-12)


@pytest.mark.parametrize("name", SWEEP_HOLDS_CONVENTION)
def test_sweep_gradients_match_finite_differences(name):
    def loss_of(xv, yv):
        return float(_sweep_loss(SWEEP[name](tf.constant(xv), tf.constant(yv))).numpy())
    x, y = tf.constant(X2), tf.constant(Y2)
    with tf.GradientTape() as tape:
        tape.watch([x, y])
        lo = _sweep_loss(SWEEP[name](x, y))
    gx, gy = tape.gradient(lo, [x, y])
    if name == "divide_no_nan":   # y = 0 is where div_no_nan jumps: compare the other elements
        mask = Y2 != 0
        np.testing.assert_allclose(gy.numpy()[mask], fd_grad(lambda v: loss_of(X2, v), Y2)[mask], rtol=1e-6)
    else:
        np.testing.assert_allclose(gy.numpy(), fd_grad(lambda v: loss_of(X2, v), Y2), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx.numpy(), fd_grad(lambda v: loss_of(v, Y2), X2), rtol=1e-6, atol=1e-8)


def test_norm_of_complex_is_real_valued():
    got = tf.norm(tf.constant(X2)).numpy()
    assert got.dtype == np.complex128 and got.imag == 0       # TF: complex dtype, |x|'s value
    np.testing.assert_allclose(got.real, np.linalg.norm(X2), rtol=1e-15)


def test_reduce_variance_and_std_of_complex_are_real():
    # TF 2.21: reduce_variance(X, axis=1), reduce_std(X) and the gradient of
    # reduce_sum(variance * [1, -2]) + std, for X below (/work/benchenv, eager tape)
    x = tf.constant(np.array([[0.5 + 0.3j, -1.2 + 0.7j], [0.8 - 1.1j, 0.25 + 0.5j]]))
    with tf.GradientTape() as tape:
        tape.watch(x)
        v, s = tf.math.reduce_variance(x, axis=1), tf.math.reduce_std(x)
        lo = tf.reduce_sum(v * [1.0, -2.0]) + s
    assert v.dtype == tf.float64 and s.dtype == tf.float64
    np.testing.assert_allclose(v.numpy(), [0.7625, 0.715625], rtol=1e-14)
    np.testing.assert_allclose(s.numpy(), 1.044255117296535, rtol=1e-14)
    np.testing.assert_allclose(tape.gradient(lo, x).numpy(),
                               [[0.9487546034411395 - 0.1521189801497505j, -1.158234065285981 + 0.34364305955074836j],
                                [-0.3794238667834863 + 1.312713880898503j, 0.5889033286283277 - 1.504237960299501j]],
                               rtol=1e-12)


def test_l2_loss_rejects_complex_as_tf():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.nn.l2_loss(tf.constant(X2))
    with tf.Graph().as_default(), pytest.raises(TypeError, match="DataType complex64 not in list"):
        tf.nn.l2_loss(tf.compat.v1.placeholder(tf.complex64, [2]))


def test_abs_of_a_list_of_complex_numbers():
    got = tf.abs([3 + 4j, -1j]).numpy()
    np.testing.assert_array_equal(got, [5.0, 1.0])
    assert got.dtype == np.float64


def test_second_derivative_of_complex_reduce_prod_is_an_error_not_a_number():
    # Cumprod (which reduce_prod's second derivative goes through) has no complex kernel here
    x = tf.constant(X2)
    with tf.GradientTape() as t2:
        t2.watch(x)
        with tf.GradientTape() as t1:
            t1.watch(x)
            lo = tf.math.real(tf.reduce_prod(x))
        g = t1.gradient(lo, x)
        l2 = tf.reduce_sum(tf.math.real(g))
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        t2.gradient(l2, x)


@pytest.mark.usefixtures("graph_mode")
def test_real_and_imag_of_a_complex_scalar_are_scalars():
    # np.ascontiguousarray gave them shape [1]; the eager gradient of real(reduce_sum(z)) then
    # failed (Unreduce: input 0 has shape [1], but the op needs [])
    g = tf.Graph()
    with g.as_default():
        s = tf.reduce_sum(tf.constant(Z))
        parts = [tf.math.real(s), tf.math.imag(s)]
    re, im = session(g).run(parts)
    assert np.shape(re) == () and np.shape(im) == ()
    np.testing.assert_allclose([re, im], [Z.sum().real, Z.sum().imag], rtol=1e-15)


def test_gradient_of_the_real_part_of_a_complex_sum():
    z = tf.constant(Z)
    with tf.GradientTape() as tape:
        tape.watch(z)
        lo = tf.math.real(tf.reduce_sum(z * tf.constant(W))) + tf.math.imag(tf.reduce_prod(z))
    # by hand: real(sum(z W)) gives conj(W); imag(P) = real(-i P) for holomorphic P = prod(z) passes
    # the upstream i (conj(-i)) back as i conj(dP/dz_k) = i conj(P / z_k)
    want = np.conj(W) + 1j * np.conj(np.prod(Z) / Z)
    np.testing.assert_allclose(tape.gradient(lo, z).numpy(), want, rtol=1e-13)


def test_jacobians_of_complex_tensors():
    """jacobian / batch_jacobian rows are the gradients of one-hot seeds, so for complex
    tensors TF's conjugate convention: d(z*z) -> conj(2 z), d|z| -> z / |z|, and a complex
    target of a real source gives its real part.  They returned None (jacobian) and zeros
    (batch_jacobian): a wrong number."""
    zv = np.array([1 + 2j, 3 - 1j], np.complex64)
    z, zb, x = tf.constant(zv), tf.constant(zv.reshape(2, 1)), tf.constant([1.0, 2.0])

    def jac(fn, src, batch=False, pfor=True):
        with tf.GradientTape(persistent=True) as t:
            t.watch(src)
            y = fn(src)
        return t.batch_jacobian(y, src) if batch else t.jacobian(y, src, experimental_use_pfor=pfor)

    square = np.diag(np.conj(2 * zv))
    eager = lambda fn, src, **k: jac(fn, src, **k)                                  # noqa: E731
    traced = lambda fn, src, **k: tf.function(lambda s: jac(fn, s, **k))(src)      # noqa: E731
    for run in (eager, traced):
        for pfor in (True, False):
            np.testing.assert_allclose(run(lambda s: s * s, z, pfor=pfor).numpy(), square, rtol=1e-6)
        np.testing.assert_allclose(run(lambda s: s * s, zb, batch=True).numpy(),
                                   np.conj(2 * zv).reshape(2, 1, 1), rtol=1e-6)
        np.testing.assert_allclose(run(tf.abs, z).numpy(), np.diag(zv / np.abs(zv)), rtol=1e-6)
        np.testing.assert_array_equal(run(lambda s: tf.complex(s, s * s), x).numpy(), np.eye(2))
