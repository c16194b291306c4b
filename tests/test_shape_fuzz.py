"""Random graphs fed with mutated shapes: every run is an error or the right numbers, never a crash.

Each graph has placeholders with unknown dims and fetches values and gradients, some
with ``grad_ys`` fed through placeholders of unknown shape.  Runs are made with the
shapes the graph was designed for and with one feed (or grad_ys) mutated: a dim
grown, shrunk, set to 0 or 1, or the rank changed.  The compiled run must then agree
with the reference interpreter: both raise (InvalidArgumentError or ValueError), or
both return the same numbers.  A compiled kernel reading or writing out of bounds
would crash, or return a neighbour's memory; the compiled runs happen in a child
process so that a crash fails the test instead of ending the test run.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

HERE = os.path.dirname(os.path.abspath(__file__))
N_GRAPHS = 32
MUTATIONS = 6


def _mutate(rng, shape):
    """A shape near ``shape`` that differs from it."""
    s = list(shape)
    for _ in range(10):
        kind = rng.integers(0, 5)
        t = list(s)
        if kind == 0 and t:
            i = rng.integers(0, len(t))
            t[i] += int(rng.integers(1, 4))
        elif kind == 1 and t:
            i = rng.integers(0, len(t))
            t[i] = max(t[i] - 1, 0)
        elif kind == 2 and t:
            t[rng.integers(0, len(t))] = int(rng.choice([0, 1]))
        elif kind == 3:
            t.insert(int(rng.integers(0, len(t) + 1)), int(rng.choice([1, 2])))
        elif t:
            t.pop(int(rng.integers(0, len(t))))
        if t != s:
            return tuple(t)
    return tuple(s) + (2,)


def build(seed):
    """(graph, fetches, feed specs {placeholder: shape}, grad_ys placeholders) for one seed.

    Every placeholder has unknown dims (some unknown rank), so any mutated shape is
    accepted by the Session and reaches the compiler."""
    rng = np.random.default_rng(seed)
    g = tf.Graph()
    n = int(rng.integers(2, 5))
    m = int(rng.integers(1, 4))
    with g.as_default():
        ph = lambda shape: tf.compat.v1.placeholder(tf.float32, None if rng.random() < 0.4 else [None] * len(shape))
        x = ph((n, m))
        w = ph((m, 3))
        v = ph((m,))
        specs = {x: (n, m), w: (m, 3), v: (m,)}
        h = tf.tanh(x) * v                                     # broadcast against a fed vector
        cands = [
            tf.matmul(h, w),                                    # (n, 3)
            tf.reduce_sum(h, axis=1, keepdims=True),            # (n, 1): keepdims gradient
            tf.reduce_max(h, axis=0),                           # (m,)
            tf.gather(h, tf.constant([0, n - 1, 0]), axis=0),   # (3, m): gather gradient
            tf.tile(h, [2, 1]),                                 # (2n, m)
            h[1:, ::-1],                                        # (n-1, m): strided-slice gradient
            tf.concat([h, tf.sin(x)], axis=0),                  # (2n, m): concat gradient
            tf.reshape(h * 2.0, [-1]),                          # (n*m,)
            tf.transpose(h) + v[:, None],                       # (m, n)
            tf.reduce_mean(h * h),                              # ()
            tf.broadcast_to(tf.reduce_sum(v), [2, 2]),          # (2, 2)
            tf.expand_dims(tf.reduce_min(h, axis=1), 0),        # (1, n)
            tf.math.cumsum(h, axis=1),                          # (n, m)
            tf.where(h > 0.1, h, tf.sin(x)),                    # (n, m)
            tf.stack([h, tf.cos(x)], axis=1),                   # (n, 2, m)
            tf.unstack(h, num=n, axis=0)[0] if rng.random() < 0.5 else tf.reduce_prod(h, axis=0),   # (m,)
            tf.matmul(w, h, transpose_a=True, transpose_b=True),  # (3, n)
            tf.squeeze(tf.reduce_sum(h, axis=0, keepdims=True), axis=0),   # (m,)
            tf.nn.softmax_cross_entropy_with_logits(labels=tf.nn.softmax(x), logits=h),   # (n,)
            tf.clip_by_value(h, -0.3, 0.4) * tf.reduce_mean(x, axis=0),   # (n, m)
        ]
        ys = [cands[i] for i in sorted(set(rng.integers(0, len(cands), size=3)))]
        fetches, gys = list(ys), []
        for y in ys:
            if rng.random() < 0.6:
                rank = y.shape.rank
                gy = tf.compat.v1.placeholder(tf.float32, None if rank is None or rng.random() < 0.4 else [None] * rank)
                specs[gy] = tuple(y.shape.as_list()) if y.shape.is_fully_defined() else None
                gys.append((gy, y))
                fetches += [gr for gr in tf.gradients(y, [x, v, w], grad_ys=gy) if gr is not None]
            else:
                fetches += [gr for gr in tf.gradients(y, [x, v, w]) if gr is not None]
    return g, fetches, specs, gys


def feeds_for(seed):
    """The runs of one seed: the designed shapes, then MUTATIONS runs with one feed's shape changed."""
    g, fetches, specs, gys = build(seed)
    rng = np.random.default_rng(10_000 + seed)
    base = {}
    for p, s in specs.items():
        if s is None:       # a grad_ys whose y shape depends on feeds: the static one is complete here
            s = ()
        base[p] = s
    for gy, y in gys:       # y's designed shape, from the interpreter
        sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": "interpret"})
        base[gy] = np.shape(sess.run(y, {p: np.ones(base[p], np.float32) for p in base if p not in dict(gys)}))
    runs = [dict(base)]
    keys = list(base)
    for _ in range(MUTATIONS):
        r = dict(base)
        p = keys[rng.integers(0, len(keys))]
        r[p] = _mutate(rng, base[p])
        runs.append(r)
    data = []
    for r in runs:
        data.append({p: (rng.standard_normal(s) if s else np.float32(rng.standard_normal())).astype(np.float32)
                     for p, s in r.items()})
    return g, fetches, data


def outcome(g, fetches, feed, mode):
    """('ok', [arrays]) or ('error', exception type name)."""
    sess = tf.compat.v1.Session(graph=g, config={"jitgrad_mode": mode})
    try:
        return "ok", [np.asarray(a) for a in sess.run(fetches, feed)]
    except (InvalidArgumentError, ValueError) as e:
        return "error", type(e).__name__


def child(seeds):
    """Runs in the subprocess: compiled vs interpreted for each seed's runs; prints JSON lines."""
    from jitgrad.cache import set_enabled
    set_enabled(False)
    for seed in seeds:
        g, fetches, data = feeds_for(seed)
        for k, feed in enumerate(data):
            print(json.dumps({"seed": seed, "run": k, "started": True}), flush=True)
            ref = outcome(g, fetches, feed, "interpret")
            got = outcome(g, fetches, feed, "compiled")
            res = {"seed": seed, "run": k, "ref": ref[0], "got": got[0]}
            if ref[0] == got[0] == "ok":
                bad = [i for i, (a, b) in enumerate(zip(ref[1], got[1]))
                       if a.shape != b.shape or not np.allclose(a, b, rtol=2e-4, atol=1e-5, equal_nan=True)]
                res["mismatch"] = bad
            elif ref[0] == got[0] == "error":
                res["types"] = [ref[1], got[1]]
            print(json.dumps(res), flush=True)


@pytest.mark.parametrize("chunk", range(4))
def test_mutated_feed_and_grad_ys_shapes_error_or_agree(chunk):
    seeds = list(range(chunk, N_GRAPHS, 4))
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_shape_fuzz as t; t.child({seeds!r})"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, JITGRAD_CACHE="0"))
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    last = lines[-1] if lines else None
    assert p.returncode == 0, f"child died (rc {p.returncode}) at {last}: {p.stderr[-2000:]}"
    done = [r for r in lines if "started" not in r]
    assert len(done) == len(seeds) * (MUTATIONS + 1)
    errors = 0
    for r in done:
        assert r["ref"] == r["got"], f"interpreter {r['ref']} but compiled {r['got']}: {r}"
        if r["ref"] == "ok":
            assert not r["mismatch"], f"compiled numbers differ from the interpreter's: {r}"
        else:
            errors += 1
            assert r["types"][0] == r["types"][1], r
    # the mutations must actually reach the shape checks (not all be accepted)
    assert errors >= len(seeds)


def test_designed_shapes_run_in_both_engines():
    """The unmutated runs are valid: the fuzz test's errors come from the mutations."""
    for seed in range(0, N_GRAPHS, 6):
        g, fetches, data = feeds_for(seed)
        ref = outcome(g, fetches, data[0], "interpret")
        assert ref[0] == "ok", (seed, ref)
