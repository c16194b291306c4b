"""A while_loop that grows a loop variable by one row per step (an accumulator
under a None shape invariant), value per call:

    h_{t+1} = tanh(h_t * w + 0.1),  x = concat([x, [h_{t+1}]], 0),  t < T,  h of 64 floats

    PYTHONPATH=. /work/benchenv/bin/python bench/bench_growing_loop.py [--steps T] [--cond] [--grad | --hessian]
    PYTHONPATH=. /work/benchenv/bin/python bench/bench_growing_loop.py --all-states [--grad | --second] [--steps T]
    PYTHONPATH=. /work/benchenv/bin/python bench/bench_growing_loop.py --all-states --project K [--grad]
    PYTHONPATH=. /work/benchenv/bin/python bench/bench_growing_loop.py --scatter [--grad] [--steps T] \
        [--baseline /work/main]
    PYTHONPATH=. /work/benchenv/bin/python bench/bench_growing_loop.py --reverse-write [--grad] [--steps T] \
        [--baseline /work/main]

--cond: the rows are appended by a tf.cond, [h] for an even t and [h, h * h] for
an odd one (each branch its own row count).
--grad: the loss sum(x * x) over the rows and its gradient with respect to w (the
reverse loop pops the rows each iteration appended; with --cond, the gradient If
pops one or two, passes/growing_vars.if_pops). With --all-states / --scatter: the
gradient of the RNN's loss with respect to x0 (and with --project, W_out).
--hessian: the loss sum(x * x) and tf.hessians of it with respect to w4, 4 floats
tiled over the state (w = tile(w4, 16)): the batched pass runs one second-order reverse
loop per row of the hessian, all in one kernel (with --cond, each pops per branch:
ops/control_flow_ops._if_popped_tail). A 64-float w would make 64 such loops: the
compile takes minutes.
--all-states --second: and d/dx0 of sum(gx^2), gx the gradient (a gradient penalty's
derivative: the second-order reverse loop appends what the first-order one popped).
--project K: the loss is sum(matmul(all_states, W_out)^2), W_out 64 x K fed (a matmul
over run-time rows, codegen/lower_rows_matmul.py); --grad adds d/dW_out (the sum
over the rows) to d/dx0.

--scatter: the all-states RNN with two rows per step, [x, x * x], stored by
ta.scatter(tf.stack([2 i, 2 i + 1]), ...) into a dynamic TensorArray (in-order
appends: compiled since staged_tensor_array.check_appends proves affine scatters;
indices of a static count, so that a tree before that runs it too).
--reverse-write: the all-states RNN writing state i at ta.write(T - 1 - i, x), T fed: out of
order, so not appends (compiled since tensor_array_preallocated.py preallocates the array
to its length, computed before the loop; one kernel for every T: the length is a run-time
row count, ZeroRows). The loss is the same sum.
--baseline TREE adds that tree's jitgrad (compiled mode, in its own process, e.g.
/work/main, where this loop ran in the interpreter), timed in the same turns.

Prints the median time per call of each system and its ratio to jitgrad's:
  * jitgrad compiled (Session, T fed; the growing buffer is native);
  * jitgrad's reference interpreter (what such a loop ran in before);
  * TensorFlow graph mode (tf.compat.v1 Session, tf.while_loop with shape_invariants);
  * TensorFlow tf.function (jit_compile off; XLA cannot compile a growing shape).
Every system's result is checked against numpy first. Systems that are not
importable are skipped. Samples alternate between the systems so load drifts hit
all alike, and the load average is printed; still, timings on a shared machine are
noisy: compare ratios from one run.
"""
import argparse
import os
import sys

import numpy as np

# (a --baseline worker imports the jitgrad of another tree)
sys.path.insert(0, os.environ.get("BENCH_JITGRAD_TREE") or os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

D = 64


def reference(w, steps, cond=False):
    h, rows = np.ones(D, np.float64), []
    for t in range(steps):
        h = np.tanh(h * w + 0.1)
        rows += [h, h * h] if cond and t % 2 else [h]
    return np.array(rows).reshape(len(rows), D)


def reference_grad(w, steps, cond=False):
    """(sum(x * x), its gradient wrt w), backpropagated by hand."""
    hs = [np.ones(D, np.float64)]
    for _ in range(steps):
        hs.append(np.tanh(hs[-1] * w + 0.1))
    gw, carry = np.zeros(D), np.zeros(D)
    for t in range(steps, 0, -1):   # rows h_t (and h_t^2 on odd steps t - 1)
        h = hs[t]
        a = carry + 2.0 * h + (4.0 * h ** 3 if cond and (t - 1) % 2 else 0.0)
        da = a * (1.0 - h * h)
        gw += da * hs[t - 1]
        carry = da * w
    return float(np.sum(reference(w, steps, cond) ** 2)), gw


def graph_program(tf, steps_ph, w_ph, cond=False):
    def body(i, h, x):
        h = tf.tanh(h * w_ph + 0.1)
        if cond:
            return i + 1, h, tf.cond(tf.equal(i % 2, 1), lambda: tf.concat([x, [h, h * h]], 0),
                                     lambda: tf.concat([x, [h]], 0))
        return i + 1, h, tf.concat([x, [h]], 0)
    _, _, x = tf.while_loop(lambda i, h, x: i < steps_ph, body, [0, tf.ones([D]), tf.zeros([0, D])],
                            shape_invariants=[tf.TensorShape([]), tf.TensorShape([D]), tf.TensorShape([None, D])])
    return x


HK = 4   # --hessian: the parameters w4, tiled over the state


def reference_hessian(w4, steps, cond=False, eps=1e-5):
    """(sum(x * x), its hessian wrt w4): central differences of the hand-derived gradient."""
    def grad(v):
        return reference_grad(np.tile(v, D // HK), steps, cond)[1].reshape(D // HK, HK).sum(0)
    cols = []
    for k in range(HK):
        d = np.zeros(HK)
        d[k] = eps
        cols.append((grad(w4 + d) - grad(w4 - d)) / (2 * eps))
    return reference_grad(np.tile(w4, D // HK), steps, cond)[0], np.stack(cols, 1)


def fetches_of(tf, steps_ph, w_ph, cond, grad, hessian=False):
    x = graph_program(tf, steps_ph, tf.tile(w_ph, [D // HK]) if hessian else w_ph, cond)
    if not (grad or hessian):
        return x
    loss = tf.reduce_sum(x * x)
    return [loss, (tf.hessians if hessian else tf.gradients)(loss, w_ph)[0]]


def jitgrad_runner(mode, w, steps, cond, grad=False, hessian=False):
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        wp = tf.compat.v1.placeholder(tf.float32, w.shape)
        x = fetches_of(tf, n, wp, cond, grad, hessian)
    s = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
    return lambda: s.run(x, {n: steps, wp: w})


def tf_graph_runner(w, steps, cond, grad=False, hessian=False):
    import tensorflow as tf
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        wp = tf.compat.v1.placeholder(tf.float32, w.shape)
        x = fetches_of(tf, n, wp, cond, grad, hessian)
    s = tf.compat.v1.Session(graph=g)
    return lambda: s.run(x, {n: steps, wp: w})


def tf_function_runner(w, steps, cond, grad=False):
    import tensorflow as tf
    if grad:   # (tf.gradients is graph-only: the tape instead)
        @tf.function
        def f(wv, n):
            with tf.GradientTape() as tape:
                tape.watch(wv)
                loss = tf.reduce_sum(graph_program(tf, n, wv, cond) ** 2)
            return loss, tape.gradient(loss, wv)
        wt, nt = tf.constant(w), tf.constant(steps)
        return lambda: [r.numpy() for r in f(wt, nt)]

    @tf.function
    def f(wv, n):
        return graph_program(tf, n, wv, cond)
    wt, nt = tf.constant(w), tf.constant(steps)
    return lambda: f(wt, nt).numpy()


# ---------------------------------------------------------------- all-states RNN (--all-states)
# x_{t+1} = tanh(W x_t + 0.1), every state written to a dynamic TensorArray, loss = sum(stack^2):
# the loss reads every state (a value of run-time rows, codegen/lower_rows.py); its gradient
# with respect to x0 runs the reverse loop over the stack's rows.
def rnn_weights():
    return ((np.arange(D * D, dtype=np.float64).reshape(D, D) % 7 - 3) / (2.0 * D)).astype(np.float32)


def out_weights(k):
    return ((np.arange(D * k, dtype=np.float64).reshape(D, k) % 5 - 2) / (4.0 * D)).astype(np.float32)


def rnn_reference(W, x0, steps, scatter=False, W_out=None):
    """(loss, d/dx0, d/dW_out or None) in float64. The rows are the states (with scatter
    [x, x * x] per state); the loss is sum(rows^2), with W_out sum((rows @ W_out)^2)."""
    x, states = x0.astype(np.float64), []
    for _ in range(steps):
        x = np.tanh(W.astype(np.float64) @ x + 0.1)
        states.append(x)
    X = np.array(states).reshape(steps, D)
    S = np.stack([X, X * X], 1).reshape(2 * steps, D) if scatter else X
    if W_out is None:
        loss, gS, gWo = float(np.sum(S * S)), 2.0 * S, None
    else:
        Y = S @ W_out.astype(np.float64)
        loss, gS, gWo = float(np.sum(Y * Y)), 2.0 * Y @ W_out.T.astype(np.float64), S.T @ (2.0 * Y)
    gX = gS[0::2] + gS[1::2] * 2.0 * X if scatter else gS   # rows -> states
    gx = np.zeros(D)   # backpropagation through time, by hand
    for t in reversed(range(steps)):
        gx = gx + gX[t]
        gx = W.astype(np.float64).T @ (gx * (1.0 - states[t] ** 2))
    return loss, gx, gWo


def rnn_second_reference(W, x0, steps, scatter=False, W_out=None, eps=1e-4):
    """d sum(gx^2) / d x0 by central differences of the hand-derived gx (float64)."""
    out = np.zeros(D)
    for k in range(D):
        d = np.zeros(D)
        d[k] = eps
        hi = np.sum(rnn_reference(W, x0 + d, steps, scatter, W_out)[1] ** 2)
        lo = np.sum(rnn_reference(W, x0 - d, steps, scatter, W_out)[1] ** 2)
        out[k] = (hi - lo) / (2 * eps)
    return out


def rnn_program(tf, steps_ph, x0_ph, W, scatter=False, wo_ph=None, second=False, reverse=False):
    """[loss, d/dx0] + [d/dW_out with wo_ph] + [d sum(gx^2)/dx0 with second]."""
    Wc = tf.constant(W)
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

    def body(i, x, ta):
        x = tf.tanh(tf.linalg.matvec(Wc, x) + 0.1)
        if scatter:
            return i + 1, x, ta.scatter(tf.stack([2 * i, 2 * i + 1]), tf.stack([x, x * x]))
        return i + 1, x, ta.write(steps_ph - 1 - i if reverse else i, x)
    _, _, ta = tf.while_loop(lambda i, x, ta: i < steps_ph, body, [0, x0_ph, ta])
    st = ta.stack()
    if wo_ph is None:
        loss = tf.reduce_sum(st * st)
        outs = [loss] + tf.gradients(loss, [x0_ph])
    else:
        y = tf.matmul(st, wo_ph)
        loss = tf.reduce_sum(y * y)
        outs = [loss] + tf.gradients(loss, [x0_ph, wo_ph])
    if second:
        outs += tf.gradients(tf.reduce_sum(outs[1] * outs[1]), [x0_ph])
    return outs


def rnn_runner(tf, config, x0, steps, grad, scatter=False, wo=None, second=False, reverse=False):
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [])
        xp = tf.compat.v1.placeholder(tf.float32, [D])
        wp = None if wo is None else tf.compat.v1.placeholder(tf.float32, wo.shape)
        outs = rnn_program(tf, n, xp, rnn_weights(), scatter, wp, second, reverse)
    s = tf.compat.v1.Session(graph=g, config=config)
    fetches = outs if grad or second else outs[:1]
    feed = {n: steps, xp: x0}
    if wo is not None:
        feed[wp] = wo
    return lambda: s.run(fetches, feed)


def rnn_args(args):
    """(x0, W_out or None): the inputs of the all-states RNN for these options."""
    x0 = np.linspace(-1, 1, D).astype(np.float32)
    return x0, (out_weights(args.project) if args.project else None)


def all_states(args):
    """Loss (and with --grad its gradient, with --second a second-order one) of the
    all-states RNN: jitgrad compiled, jitgrad's interpreter (what it ran in before),
    [--baseline's jitgrad,] TF graph mode; samples alternate between the systems."""
    x0, wo = rnn_args(args)
    want_loss, want_gx, want_gwo = rnn_reference(rnn_weights(), x0, args.steps, args.scatter, wo)
    want_ggx = (rnn_second_reference(rnn_weights(), x0.astype(np.float64), args.steps, args.scatter, wo)
                if args.second else None)
    systems = []
    import jitgrad
    how = (x0, args.steps, args.grad, args.scatter, wo, args.second, args.reverse_write)
    for mode in ("compiled", "interpret"):
        cfg = jitgrad.compat.v1.ConfigProto(jitgrad_mode=mode)
        systems.append((f"jitgrad {mode}", rnn_runner(jitgrad, cfg, *how)))
    if args.baseline:
        systems.append((f"jitgrad@{args.baseline}", _baseline_worker(args)))
    try:
        import tensorflow
        systems.append(("TF graph mode", rnn_runner(tensorflow, None, *how)))
    except ImportError as e:
        print(f"TF graph mode skipped ({e})")
    for name, run in systems:
        got = run()
        np.testing.assert_allclose(got[0], want_loss, rtol=1e-4, err_msg=name)
        if args.grad or args.second:
            np.testing.assert_allclose(np.reshape(got[1], np.shape(want_gx)), want_gx, rtol=1e-3, atol=1e-5,
                                       err_msg=name)
            if wo is not None:
                np.testing.assert_allclose(np.reshape(got[2], np.shape(want_gwo)), want_gwo, rtol=1e-3, atol=1e-4,
                                           err_msg=name)
        if args.second:
            np.testing.assert_allclose(np.reshape(got[-1], np.shape(want_ggx)), want_ggx, rtol=1e-2,
                                       atol=1e-3 * np.abs(want_ggx).max(), err_msg=name)
    before = _fallbacks()
    systems[0][1]()
    fell_back = _fallbacks() != before
    med = alternated_medians(systems, args.repeat)
    what = ("loss + gx + d sum(gx^2)/d x0" if args.second else "loss + d loss/d x0" if args.grad else "loss")
    if wo is not None:
        what = (f"loss of states @ W_out[{D},{args.project}]" + (" + d/d x0, d/d W_out" if args.grad else "")
                + (" + d sum(gx^2)/d x0" if args.second else ""))
    how = (", two rows per step by ta.scatter" if args.scatter else
           ", written in reverse by ta.write(T - 1 - i)" if args.reverse_write else "")
    print(f"all-states RNN {what}{how}, T = {args.steps}, state of {D} float32 (median per call, samples "
          f"alternated; load average {os.getloadavg()[0]:.2f})")
    if fell_back:
        print("  (jitgrad compiled FELL BACK to the interpreter for this program)")
    for name, t in med.items():
        print(f"{name:22s} {t * 1e6:12.1f} us  {t / med['jitgrad compiled']:8.2f}x jitgrad compiled")


def alternated_medians(systems, repeat):
    """{name: median seconds per call}, the systems' calls taking turns so that load
    drifts on a shared machine hit all alike."""
    import statistics
    import time
    times = {name: [] for name, _ in systems}
    for _ in range(repeat):
        for name, run in systems:
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


class _baseline_worker:
    """Another tree's jitgrad (compiled mode) in its own process: each call runs the program
    once there and returns its result (arrays flattened); the child times nothing, the parent
    times the call (a pipe round trip of ~0.1 ms, small next to the loop)."""

    def __init__(self, args):
        import subprocess
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(args.steps)]
        cmd += ["--grad"] * args.grad + ["--scatter"] * args.scatter + ["--second"] * args.second
        cmd += ["--reverse-write"] * args.reverse_write
        cmd += ["--project", str(args.project)] if args.project else []
        env = dict(os.environ, BENCH_JITGRAD_TREE=args.baseline, PYTHONPATH=args.baseline)
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)

    def __call__(self):
        self.p.stdin.write("run\n")
        self.p.stdin.flush()
        return [np.float32(v) if k == 0 else np.array(v.split(","), np.float32)
                for k, v in enumerate(self.p.stdout.readline().strip().split(" "))]


def _worker(args):
    import jitgrad
    x0, wo = rnn_args(args)
    run = rnn_runner(jitgrad, jitgrad.compat.v1.ConfigProto(jitgrad_mode="compiled"), x0, args.steps, args.grad,
                     args.scatter, wo, args.second, args.reverse_write)
    for _ in sys.stdin:
        got = run()
        parts = [repr(float(got[0]))] + [",".join(repr(float(v)) for v in np.ravel(g)) for g in got[1:]]
        print(" ".join(parts), flush=True)


def _fallbacks():
    import jitgrad
    return jitgrad.cache_info()["fallbacks"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--all-states", action="store_true", help="the all-states RNN loss instead")
    ap.add_argument("--grad", action="store_true", help="and the gradient of a loss on the rows")
    ap.add_argument("--hessian", action="store_true", help="and tf.hessians of that loss wrt 4 tiled weights")
    ap.add_argument("--second", action="store_true", help="with --all-states: and a second-order gradient")
    ap.add_argument("--project", type=int, default=0, metavar="K",
                    help="with --all-states: the loss on matmul(all_states, W_out[64, K])")
    ap.add_argument("--cond", action="store_true", help="a tf.cond appends one or two rows per step")
    ap.add_argument("--scatter", action="store_true", help="the all-states RNN storing [x, x * x] by ta.scatter")
    ap.add_argument("--reverse-write", action="store_true", help="the all-states RNN writing state i at T - 1 - i")
    ap.add_argument("--baseline", help="with --all-states / --scatter / --reverse-write: also this tree's jitgrad "
                                       "(e.g. /work/main)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return _worker(args)
    if args.all_states or args.scatter or args.reverse_write:
        return all_states(args)
    if args.second or args.project or args.baseline:
        ap.error("--second, --project and --baseline go with --all-states, --scatter or --reverse-write")
    w = np.linspace(-1.5, 1.5, HK if args.hessian else D).astype(np.float32)
    if args.hessian:
        want = reference_hessian(w.astype(np.float64), args.steps, args.cond)
    elif args.grad:
        want = reference_grad(w.astype(np.float64), args.steps, args.cond)
    else:
        want = reference(w.astype(np.float64), args.steps, args.cond)
    how = (args.steps, args.cond, args.grad)
    hess = {"hessian": True} if args.hessian else {}
    systems = [("jitgrad compiled", lambda: jitgrad_runner("compiled", w, *how, **hess)),
               ("jitgrad interpreter", lambda: jitgrad_runner("interpret", w, *how, **hess)),
               ("TF graph mode", lambda: tf_graph_runner(w, *how, **hess))]
    if not args.hessian:   # (TF's tape jacobian of a grown loop's gradient: not timed)
        systems.append(("TF tf.function", lambda: tf_function_runner(w, *how)))
    runs = []
    for name, make in systems:
        try:
            run = make()
        except ImportError as e:
            print(f"{name:22s} skipped ({e})")
            continue
        got = run()
        if args.hessian:
            np.testing.assert_allclose(got[0], want[0], rtol=1e-4, err_msg=name)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-2, atol=1e-3 * np.abs(want[1]).max(), err_msg=name)
        elif args.grad:
            np.testing.assert_allclose(got[0], want[0], rtol=1e-4, err_msg=name)
            np.testing.assert_allclose(got[1], want[1], rtol=2e-3, atol=1e-3, err_msg=name)
        else:
            np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-6, err_msg=name)
        runs.append((name, run))
        if name == "jitgrad compiled":
            fallbacks = _fallbacks()
            run()
            assert _fallbacks() == fallbacks, "the compiled loop ran in the interpreter"
    results = alternated_medians(runs, args.repeat)
    base = results.get("jitgrad compiled")
    how = (", rows appended by a tf.cond" if args.cond else "") + (", loss + d loss/d w" if args.grad else "")
    how += f", loss + tf.hessians wrt w{HK} (w = tile(w{HK}, {D // HK}))" if args.hessian else ""
    print(f"growing while_loop{how}, T = {args.steps}, rows of {D} float32 (median per call, samples alternated; "
          f"load average {os.getloadavg()[0]:.2f})")
    for name, t in results.items():
        ratio = f"{t / base:8.2f}x jitgrad" if base else ""
        print(f"{name:22s} {t * 1e6:12.1f} us  {ratio}")


if __name__ == "__main__":
    main()
