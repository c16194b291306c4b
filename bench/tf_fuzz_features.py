"""Feature scenarios for bench/tf_fuzz.py (mode "features"): the autodiff API around a random program.

tf_fuzz's random programs exercise the ops; these scenarios exercise what users wrap around
them: GradientTape (persistent, watch_accessed_variables=False, output_gradients, unconnected
gradients, jacobian / batch_jacobian with experimental_use_pfor both ways, nested tapes,
stop_recording), tf.gradients with stop_gradients on intermediates and several sources,
tf.hessians of several inputs, control flow with captured tensors and two carried values,
Variables assigned inside tf.function, complex / bfloat16 programs, empty and size-1 dims,
and bad inputs (which must raise TF's exception class, never crash or return a number).

Every scenario is `fn(tf, seed, mode)` returning a list of numpy arrays; `mode` is None (TF,
or jitgrad eager) or a jitgrad Session mode ("compiled" / "interpret") for graph scenarios.
The same code runs against `import tensorflow` and `import jitgrad`.
"""
import numpy as np

import tf_fuzz as core  # noqa: E402 - bench/ is on sys.path when tf_fuzz runs

# ------------------------------------------------------------------ helpers

# The float dtype of the programs; tf_fuzz sets it to float64 to tell a TF float32 artifact
# (a flushed denormal) from a jitgrad error (agrees_with_tf_float64).
FLOAT = "float32"


def _program(seed, shapes=None, dtype=None):
    """A random tf_fuzz program (its own seed stream), optionally on given input shapes."""
    dtype = dtype or FLOAT
    prog = core.make_program(seed, edge=(seed % 10) < 2, float_dtypes=False)
    if shapes is not None:
        rng = np.random.default_rng(seed + 1)
        prog = prog._replace(shapes=shapes, values=[rng.uniform(-2, 2, s).astype(np.float32) for s in shapes])
    return prog._replace(dtype=dtype)


def _np(t):
    return None if t is None else np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _flat(results, tf=None):
    """numpy results plus a None mask (None gradients are compared by position)."""
    out, mask = [], []
    for r in results:
        mask.append(r is None)
        if r is not None and hasattr(r, "indices") and hasattr(r, "dense_shape"):
            # TF's IndexedSlices (a gather's gradient): compared dense, as jitgrad gives it (README)
            v = np.asarray(r.values)
            dense = np.zeros(tuple(np.asarray(r.dense_shape)), v.dtype)
            np.add.at(dense, np.asarray(r.indices), v)
            r = dense
        if r is not None:
            out.append(np.asarray(r.numpy() if hasattr(r, "numpy") else r))
    return out + [np.asarray(mask)]


def _session(tf, g, mode):
    kw = {}
    if mode:
        kw["config"] = tf.compat.v1.ConfigProto(jitgrad_mode=mode)
    return tf.compat.v1.Session(graph=g, **kw)


def _small(prog):
    return sum(int(np.prod(s)) for s in prog.shapes) <= 8


# ------------------------------------------------------------- eager: tapes

def tape_persistent(tf, seed, mode):
    """One persistent tape asked three times: list sources, one source, a later output."""
    prog = _program(seed)
    xs = [tf.Variable(v) for v in core._values(prog)]
    with tf.GradientTape(persistent=True) as t:
        outs = core.build(tf, prog, xs)
        loss = core.loss_of(tf, prog, outs)
    g1 = t.gradient(loss, xs)
    g2 = t.gradient(loss, xs[0])
    g3 = t.gradient(outs[0], xs, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return _flat(list(outs) + g1 + [g2] + g3)


def tape_watch_subset(tf, seed, mode):
    """watch_accessed_variables=False: only what is watched (a constant and/or a Variable) counts."""
    prog = _program(seed)
    vals = core._values(prog)
    xs = [tf.Variable(v) if i % 2 else tf.constant(v) for i, v in enumerate(vals)]
    watched = [x for i, x in enumerate(xs) if (seed >> i) & 1] or xs[:1]
    unconnected = ["none", "zero"][seed % 2]
    with tf.GradientTape(watch_accessed_variables=False) as t:
        for x in watched:
            t.watch(x)
        loss = core.loss_of(tf, prog, core.build(tf, prog, xs))
    return _flat(t.gradient(loss, xs, unconnected_gradients=unconnected)) + [np.asarray(len(t.watched_variables()))]


def tape_output_gradients(tf, seed, mode):
    """gradient([outs], xs, output_gradients=[w...]): a vector-Jacobian product per output."""
    prog = _program(seed)
    xs = [tf.constant(v) for v in core._values(prog)]
    with tf.GradientTape() as t:
        t.watch(xs)
        outs = core.build(tf, prog, xs)
    rng = np.random.default_rng(seed + 2)
    ws = [rng.uniform(-1, 1, tuple(o.shape)).astype(FLOAT) for o in outs]
    fl = all(o.dtype == tf.as_dtype(FLOAT) for o in outs)
    grads = t.gradient(list(outs), xs, output_gradients=ws if fl else None,
                       unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return _flat(list(outs) + grads)


def _jacobian(tf, seed, use_pfor):
    prog = _program(seed)
    if not _small(prog):
        prog = _program(seed, shapes=[(3,)] * len(prog.shapes))
    xs = [tf.Variable(v) for v in core._values(prog)]
    with tf.GradientTape(persistent=True) as t:
        outs = core.build(tf, prog, xs)
    y = outs[-1]
    return _flat([y] + t.jacobian(y, xs, experimental_use_pfor=use_pfor,
                                  unconnected_gradients=["none", "zero"][seed % 2]))


def tape_jacobian_pfor(tf, seed, mode):
    return _jacobian(tf, seed, True)


def tape_jacobian_loop(tf, seed, mode):
    return _jacobian(tf, seed, False)


def _batch_jacobian(tf, seed, use_pfor):
    """Sources with a batch dim; the target keeps it if the program does, else x * tanh(x) is used."""
    rng = np.random.default_rng(seed)
    shape = [(2, 3), (2, 1), (3, 2, 2), (1, 3)][seed % 4]
    prog = _program(seed, shapes=[shape])
    x = tf.constant(core._values(prog)[0])
    with tf.GradientTape(persistent=True) as t:
        t.watch(x)
        outs = core.build(tf, prog, [x])
        cands = [o for o in outs if len(o.shape) >= 1 and o.shape[0] == shape[0] and o.dtype == tf.as_dtype(FLOAT)]
        y = cands[-1] if cands else x * tf.tanh(x)
        if rng.random() < 0.5:
            y = y * tf.reduce_sum(x)          # rows that are not independent
    return _flat([y, t.batch_jacobian(y, x, experimental_use_pfor=use_pfor)])


def tape_batch_jacobian_pfor(tf, seed, mode):
    return _batch_jacobian(tf, seed, True)


def tape_batch_jacobian_loop(tf, seed, mode):
    return _batch_jacobian(tf, seed, False)


def tape_nested(tf, seed, mode):
    """Second order through nested tapes: outer.jacobian and outer.gradient of the inner gradient."""
    prog = _program(seed)
    if not _small(prog):
        prog = _program(seed, shapes=[(2,)] * len(prog.shapes))
    xs = [tf.Variable(v) for v in core._values(prog)]
    with tf.GradientTape(persistent=True) as outer:
        with tf.GradientTape() as inner:
            loss = core.loss_of(tf, prog, core.build(tf, prog, xs))
        g = inner.gradient(loss, xs[0], unconnected_gradients="zero")
        gs = tf.reduce_sum(g * g)
    return _flat([g, outer.jacobian(g, xs[0], unconnected_gradients="zero")]
                 + outer.gradient(gs, xs, unconnected_gradients="zero"))


def tape_stop_recording(tf, seed, mode):
    """Ops under stop_recording are constants to the tape (their values still flow)."""
    prog = _program(seed)
    xs = [tf.Variable(v) for v in core._values(prog)]
    with tf.GradientTape() as t:
        outs = core.build(tf, prog, xs)
        with t.stop_recording():
            s = tf.reduce_sum(tf.square(xs[0]))
        loss = core.loss_of(tf, prog, outs) * s + s
    return _flat([loss] + t.gradient(loss, xs))


def variable_assign_function(tf, seed, mode):
    """Variables assigned inside tf.function, called twice; a tape gradient through the reads."""
    rng = np.random.default_rng(seed)
    shape = [(), (3,), (2, 3)][seed % 3]
    v = tf.Variable(rng.uniform(-1, 1, shape).astype(np.float32))
    w = tf.Variable(rng.uniform(-1, 1, shape).astype(np.float32))
    ops = [int(k) for k in rng.integers(0, 4, 3)]

    @tf.function
    def step(a):
        with tf.GradientTape() as t:
            t.watch(a)
            for k in ops:
                if k == 0:
                    v.assign_add(a * w)
                elif k == 1:
                    v.assign_sub(tf.tanh(v) * 0.5)
                elif k == 2:
                    v.assign(v * w + 1.0)
                else:
                    w.assign(tf.sin(w) + a)
            y = tf.reduce_sum(v * w * a)
        return y, t.gradient(y, [a, w], unconnected_gradients="zero")
    a = tf.constant(rng.uniform(-1, 1, shape).astype(np.float32))
    y1, g1 = step(a)
    y2, g2 = step(a * 2.0)
    return _flat([y1] + list(g1) + [y2] + list(g2) + [v, w])


# --------------------------------------------------------------- graph mode

def gradients_intermediate(tf, seed, mode):
    """tf.gradients to sources that include intermediates, stop_gradients on other intermediates."""
    prog = _program(seed)
    rng = np.random.default_rng(seed + 3)
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(prog.dtype, s) for s in prog.shapes]
        pool = core.build_pool(tf, prog, xs)
        outs = pool[len(xs):][-prog.n_out:]
        loss = core.loss_of(tf, prog, outs)
        mids = [t for t in pool[len(xs):-1] if t.dtype == tf.as_dtype(FLOAT)]
        srcs = xs + [mids[int(i)] for i in rng.integers(0, len(mids), min(2, len(mids)))] if mids else xs
        stop = [mids[int(rng.integers(0, len(mids)))]] if mids and rng.random() < 0.7 else None
        method = [None, tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_TREE,
                  tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N][seed % 4]
        grads = tf.gradients(loss, srcs, stop_gradients=stop, aggregation_method=method,
                             unconnected_gradients=["none", "zero"][(seed >> 2) % 2])
        grads = [None if gr is None else tf.convert_to_tensor(gr) for gr in grads]
        fetch = [gr for gr in grads if gr is not None]
    with _session(tf, g, mode) as s:
        res = s.run(fetch, dict(zip(xs, core._values(prog))))
    return [np.asarray(r) for r in res] + [np.asarray([gr is None for gr in grads])]


def hessians_multi(tf, seed, mode):
    """tf.hessians of a loss over several inputs (a block per input)."""
    prog = _program(seed)
    if not _small(prog):
        prog = _program(seed, shapes=[(2,)] * len(prog.shapes))
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(prog.dtype, s) for s in prog.shapes]
        loss = core.loss_of(tf, prog, core.build(tf, prog, xs))
        hs = tf.hessians(loss, xs)
        fetch = [h for h in hs if h is not None]
    with _session(tf, g, mode) as s:
        res = s.run(fetch, dict(zip(xs, core._values(prog))))
    return [np.asarray(r) for r in res] + [np.asarray([h is None for h in hs])]


def _flow_body(tf, kind, x, c, p):
    """Control flow over x that also captures c (another tensor of the program)."""
    cs = tf.reduce_mean(c)
    if kind == "cond_capture":
        return tf.cond(tf.reduce_max(x) > cs, lambda: tf.tanh(x) * cs, lambda: x - tf.sin(cs))
    if kind == "while_two":
        n = 1 + p % 3
        _, a, b = tf.while_loop(lambda i, a, b: i < n,
                                lambda i, a, b: (i + 1, a * 0.5 + tf.tanh(b) * cs, b - a * 0.25),
                                [tf.constant(0), x, x * 0.5])
        return a + b
    if kind == "while_dyn":
        # trip count from data: stops when the carried value's sum leaves a band
        _, a = tf.while_loop(lambda i, a: tf.logical_and(i < 4, tf.reduce_sum(a) < 5.0),
                             lambda i, a: (i + 1, a + tf.square(a) * 0.1 + cs * 0.1), [tf.constant(0), x])
        return a
    if len(x.shape) == 0:
        return x * cs
    if kind == "map_two":
        return tf.map_fn(lambda e: e[0] * tf.sigmoid(e[1]) + cs, (x, x * 2.0), fn_output_signature=x.dtype)
    if kind == "scan_rev":
        return tf.scan(lambda acc, v: acc * tf.tanh(v) + cs, x, reverse=True)
    return tf.foldr(lambda acc, v: acc * 0.5 + tf.sin(v) * cs, x, initializer=tf.zeros_like(x[0]))


FLOWS = ["cond_capture", "while_two", "while_dyn", "map_two", "scan_rev", "foldr"]


def control_flow_grads(tf, seed, mode):
    """Values, tf.gradients and (small) tf.hessians through control flow with captured tensors."""
    prog = _program(seed)
    g = tf.Graph()
    with g.as_default():
        xs = [tf.compat.v1.placeholder(prog.dtype, s) for s in prog.shapes]
        pool = core.build_pool(tf, prog, xs)
        fl = [t for t in pool if t.dtype == tf.as_dtype(FLOAT)]
        kind = FLOWS[seed % len(FLOWS)]
        y = _flow_body(tf, kind, fl[-1], fl[seed % len(fl)], seed >> 3)
        loss = tf.reduce_sum(y * y) * 0.5
        grads = tf.gradients(loss, xs, unconnected_gradients="zero")
        grads = [tf.convert_to_tensor(gr) for gr in grads]    # TF: IndexedSlices of a gather (README)
        fetch = [y] + grads
        if _small(prog) and len(xs) == 1:
            fetch += tf.hessians(loss, xs)
    with _session(tf, g, mode) as s:
        res = s.run(fetch, dict(zip(xs, core._values(prog))))
    return [np.asarray(r) for r in res]


def control_flow_tape(tf, seed, mode):
    """The same control flow under a GradientTape (eager) and inside tf.function."""
    prog = _program(seed)
    kind = FLOWS[seed % len(FLOWS)]

    def f(*xs):
        with tf.GradientTape() as t:
            t.watch(list(xs))
            pool = core.build_pool(tf, prog, list(xs))
            fl = [v for v in pool if v.dtype == tf.as_dtype(FLOAT)]
            y = _flow_body(tf, kind, fl[-1], fl[seed % len(fl)], seed >> 3)
            loss = tf.reduce_sum(y * y) * 0.5
        return [y] + t.gradient(loss, list(xs), unconnected_gradients="zero")
    xs = [tf.constant(v) for v in core._values(prog)]
    return _flat(f(*xs) + list(tf.function(f)(*xs)))


# ------------------------------------------------------------ dtypes, shapes

# The complex ops jitgrad offers (TF also takes complex exp, log, sin, tanh, sqrt, reciprocal,
# pow, matmul, reduce_mean / prod: jitgrad raises TF's dtype error for them, a gap, not a bug)
COMPLEX_UNARY = {
    "square": lambda tf, z: tf.square(z), "conj": lambda tf, z: tf.math.conj(z), "neg": lambda tf, z: -z,
    "recip": lambda tf, z: 1.0 / z, "mul_conj": lambda tf, z: z * tf.math.conj(z) + z,
    "div": lambda tf, z: z / (z + (1.0 + 0.5j)), "sub": lambda tf, z: (0.5 - 1j) - z * z,
    "abs_c": lambda tf, z: tf.complex(tf.abs(z), tf.zeros_like(tf.math.real(z))),
    "real_imag": lambda tf, z: tf.complex(tf.math.real(z) * tf.math.imag(z), tf.math.imag(z)),
    "sum": lambda tf, z: tf.reduce_sum(z, axis=-1, keepdims=True) + z if len(z.shape) else z,
    "add_n": lambda tf, z: tf.add_n([z, z * z, tf.math.conj(z)]),
    "transpose": lambda tf, z: tf.transpose(z), "reverse": lambda tf, z: z[::-1] if len(z.shape) else z,
}


def complex_program(tf, seed, mode):
    """A chain of complex ops; values and the gradient of a real loss |z|^2 (TF's conjugate convention)."""
    rng = np.random.default_rng(seed)
    dt = [np.complex64, np.complex128][seed % 2]
    shape = [(), (3,), (2, 3), (2, 2)][(seed >> 1) % 4]
    re, im = (rng.uniform(-1.5, 1.5, shape) for _ in range(2))
    names = [str(n) for n in rng.choice(sorted(COMPLEX_UNARY), int(rng.integers(1, 4)))]
    x = tf.constant((re + 1j * im).astype(dt))
    with tf.GradientTape() as t:
        t.watch(x)
        z = x
        for n in names:
            z = COMPLEX_UNARY[n](tf, z)
        loss = tf.reduce_sum(tf.math.real(z * tf.math.conj(z)))
    return _flat([z, loss, t.gradient(loss, x)])


def bfloat16_program(tf, seed, mode):
    """A float program run in bfloat16 (graph, tf.gradients)."""
    # the float64 rerun (tf_fuzz.features_agree_with_tf_float64) runs TF's float64 program: with
    # bfloat16's 8-bit significand, cancellations in TF's gradient leave it further from the
    # exact value than jitgrad's. (Seed 120164 was such a case until the half sigmoid rounded as
    # TF's; what remains is TF's grappler reordering AddN in graph mode: a Session with
    # arithmetic_optimization OFF gives jitgrad's numbers, README "Known differences".)
    prog = _program(seed)._replace(dtype="bfloat16" if FLOAT == "float32" else FLOAT)
    return core.run_graph(tf, prog, mode)


EDGE_SHAPES = [(0,), (0, 3), (2, 0), (1, 1), (1,), (1, 1, 3), (3, 1), ()]


def _edge_program(seed):
    rng = np.random.default_rng(seed)
    shapes = [EDGE_SHAPES[int(i)] for i in rng.integers(0, len(EDGE_SHAPES), int(rng.integers(1, 4)))]
    return _program(seed, shapes=shapes)


def empty_dims_graph(tf, seed, mode):
    """A program over empty and size-1 dims (broadcasting, reductions of nothing), graph mode."""
    return core.run_graph(tf, _edge_program(seed), mode)


def empty_dims_eager(tf, seed, mode):
    return core.run_eager(tf, _edge_program(seed))


# ---------------------------------------------------------------- bad inputs

def _bad(tf, kind, p, ph):
    """Code for one bad input; returns its fetches. Each input is made by ph(dtype, shape, value): a
    placeholder fed `value` in graph mode, the value itself eagerly (so the eager run never builds
    the graph, whose build-time checks may differ from TF's)."""
    f32 = np.float32
    if kind == "feed_shape":
        x = ph(tf.float32, [2, 3], np.ones((3, 2), f32))
        return [x * 2.0]
    if kind == "feed_dtype":
        x = ph(tf.int32, [3], np.array([1.5, 2.5, -3.5], f32))
        return [x + 1]
    if kind == "feed_rank":
        x = ph(tf.float32, [None, 3], np.ones((3,), f32))
        return [tf.reduce_sum(x, 1)]
    if kind == "gather_oob":
        x = ph(tf.float32, [4, 2], np.ones((4, 2), f32))
        i = ph(tf.int32, [3], np.array([0, 7, 1], np.int32))
        return [tf.gather(x, i, axis=p % 2)]
    if kind == "gather_neg":
        x = ph(tf.float32, [4], np.arange(4, dtype=f32))
        i = ph(tf.int32, [2], np.array([-1, 2], np.int32))
        return [tf.gather(x, i)]
    if kind == "gather_grad_oob":
        x = ph(tf.float32, [3], np.ones(3, f32))
        i = ph(tf.int32, [2], np.array([1, 3], np.int32))
        y = tf.reduce_sum(tf.gather(x, i) ** 2)
        return [tf.convert_to_tensor(tf.gradients(y, x)[0])]
    if kind == "one_hot_oob":
        i = ph(tf.int32, [4], np.array([0, 3, -1, 2], np.int32))
        return [tf.one_hot(i, 3, on_value=2.0, off_value=-1.0)]
    if kind == "sparse_xent_oob":
        lg = ph(tf.float32, [2, 3], np.zeros((2, 3), f32))
        lb = ph(tf.int32, [2], np.array([1, 3], np.int32))
        return [tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lb, logits=lg)]
    if kind == "reshape_bad":
        x = ph(tf.float32, [None], np.ones(5, f32))
        return [tf.reshape(x, [2, -1])]
    if kind == "matmul_bad":
        a = ph(tf.float32, [None, None], np.ones((2, 3), f32))
        return [tf.matmul(a, a)]
    if kind == "concat_bad":
        a = ph(tf.float32, [None, None], np.ones((2, 3), f32))
        b = ph(tf.float32, [None, None], np.ones((2, 2), f32))
        return [tf.concat([a, b], 0)]
    if kind == "broadcast_bad":
        a = ph(tf.float32, [None], np.ones(3, f32))
        b = ph(tf.float32, [None], np.ones(2, f32))
        return [a + b]
    if kind == "tensor_array_oob":
        x = ph(tf.float32, [3], np.ones(3, f32))
        ta = tf.TensorArray(tf.float32, size=2).unstack(tf.reshape(x[:2], [2]))
        return [ta.read(2 + p % 3)]
    if kind == "slice_oob":
        x = ph(tf.float32, [None], np.ones(3, f32))
        return [tf.slice(x, [1], [4])]
    if kind == "strided_oob":
        x = ph(tf.float32, [None, 2], np.ones((3, 2), f32))
        return [x[5]]
    if kind == "split_bad":
        x = ph(tf.float32, [None], np.ones(5, f32))
        return list(tf.split(x, [2, 2]))
    raise KeyError(kind)


BAD = ["feed_shape", "feed_dtype", "feed_rank", "gather_oob", "gather_neg", "gather_grad_oob", "one_hot_oob",
       "sparse_xent_oob", "reshape_bad", "matmul_bad", "concat_bad", "broadcast_bad", "tensor_array_oob",
       "slice_oob", "strided_oob", "split_bad"]


def bad_input_graph(tf, seed, mode):
    feeds = {}

    def ph(dtype, shape, value):
        x = tf.compat.v1.placeholder(dtype, shape)
        feeds[x] = value
        return x

    g = tf.Graph()
    with g.as_default():
        fetch = _bad(tf, BAD[seed % len(BAD)], seed >> 4, ph)
    with _session(tf, g, mode) as s:
        return [np.asarray(r) for r in s.run(fetch, feeds)]


def bad_input_eager(tf, seed, mode):
    """The same bad input, eagerly: the placeholders become the fed values (skipping feed checks)."""
    kind = BAD[seed % len(BAD)]
    if kind.startswith("feed"):
        kind = "gather_oob"
    fetch = _bad(tf, kind, seed >> 4, lambda dtype, shape, value: tf.constant(value))
    return [np.asarray(f.numpy()) for f in fetch]


# ------------------------------------------------------------------ catalogue

# name -> (fn, graph?) ; graph scenarios run jitgrad compiled and interpreted
SCENARIOS = {
    "tape_persistent": (tape_persistent, False), "tape_watch_subset": (tape_watch_subset, False),
    "tape_output_gradients": (tape_output_gradients, False), "tape_jacobian_pfor": (tape_jacobian_pfor, False),
    "tape_jacobian_loop": (tape_jacobian_loop, False), "tape_batch_jacobian_pfor": (tape_batch_jacobian_pfor, False),
    "tape_batch_jacobian_loop": (tape_batch_jacobian_loop, False), "tape_nested": (tape_nested, False),
    "tape_stop_recording": (tape_stop_recording, False), "variable_assign_function": (variable_assign_function, False),
    "gradients_intermediate": (gradients_intermediate, True), "hessians_multi": (hessians_multi, True),
    "control_flow_grads": (control_flow_grads, True), "control_flow_tape": (control_flow_tape, False),
    "complex_program": (complex_program, False), "bfloat16_program": (bfloat16_program, True),
    "empty_dims_graph": (empty_dims_graph, True), "empty_dims_eager": (empty_dims_eager, False), "bad_input_graph": (bad_input_graph, True),
    "bad_input_eager": (bad_input_eager, False),
}
