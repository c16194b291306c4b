"""Session.run's hot path (generated runners), make_callable, the pre-pass
kernel key (warm starts skip the passes), lazy imports, and the MCJIT
TargetMachine ownership crash (run in a subprocess: a segfault fails the test)."""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import errors
from jitgrad.cache import set_enabled

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _fresh():
    set_enabled(False)
    tf.clear_cache()
    yield
    set_enabled(None)


def S(g):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))


def w1():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = tf.compat.v1.placeholder(tf.float32, [])
        z = x ** 2 + y ** 3
        grads = tf.gradients(z, [x, y])
    return g, x, y, grads


def _subprocess(code, env=None, timeout=300):
    e = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


def test_fast_path_installed_and_values():
    g, x, y, grads = w1()
    sess = S(g)
    feeds = [{x: 1.0, y: 2.0}, {x: np.float32(3.0), y: 2}, {x: np.array(0.5, np.float32), y: np.float64(-1.5)},
             {x: 1.0, y: 2.0}]
    for _ in range(2):
        for fd in feeds:
            out = sess.run(grads, fd)
            assert type(out) is list and len(out) == 2
            assert all(type(v) is np.float32 for v in out)
            xv, yv = (np.float32(v) for v in fd.values())
            assert out[0] == 2 * xv and out[1] == np.float32(3) * yv * yv
    assert sess._fast, "no runner was installed"
    info = tf.cache_info()
    assert info["compiles"] == 1 and info["plan_misses"] == 1 and info["plan_hits"] == 7
    # tuple and single-tensor fetches keep their structure
    assert type(sess.run(tuple(grads), {x: 1.0, y: 2.0})) is tuple
    for _ in range(3):
        assert sess.run(grads[1], {x: 1.0, y: 2.0}) == 12.0
        assert sess.run(tuple(grads), {x: 1.0, y: 2.0}) == (2.0, 12.0)


def test_results_never_alias_across_calls():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        s = tf.reduce_sum(x * x)
        gx = tf.gradients(s, x)[0]
    sess = S(g)
    a = np.array([1, 2, 3], np.float32)
    outs = [sess.run([s, gx], {x: a * k}) for k in range(1, 5)]
    for k, (sv, gv) in enumerate(outs, 1):
        np.testing.assert_array_equal(gv, 2 * a * k)
        assert sv == np.float32((a * k * a * k).sum())
    ids = {id(o[1]) for o in outs}
    assert len(ids) == 4
    outs[-1][1][:] = 99          # mutating a result must not affect the next one
    np.testing.assert_array_equal(sess.run(gx, {x: a}), 2 * a)
    assert not np.shares_memory(sess.run(gx, {x: a}), sess.run(gx, {x: a}))
    # a fetched feed is a copy, not the caller's array
    r = sess.run(x, {x: a})
    r2 = sess.run(x, {x: a})
    assert not np.shares_memory(r, a) and not np.shares_memory(r2, a) and r is not r2


def test_validation_still_raises_after_fast_path():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        n = tf.compat.v1.placeholder(tf.int32, [])
        y = x * 2.0 + tf.cast(n, tf.float32)
    sess = S(g)
    good = {x: np.ones(2, np.float32), n: 3}
    for _ in range(4):
        np.testing.assert_array_equal(sess.run(y, good), [5.0, 5.0])
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor"):
        sess.run(y, {x: np.ones(3, np.float32), n: 3})
    # TF's Session casts a feed as numpy does (TF 2.21: 1.5 and True fed to an int32 scalar give 1);
    # a Python int the dtype cannot hold is a TypeError
    np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, np.float32), n: 1.5}), [3.0, 3.0])
    np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, np.float32), n: True}), [3.0, 3.0])
    with pytest.raises(TypeError, match="Type of feed value 1099511627776"):
        sess.run(y, {x: np.ones(2, np.float32), n: 2 ** 40})
    with pytest.raises(TypeError):
        sess.run(y, {x: np.ones(2, np.float32), n: None})
    # other value kinds go through the general path and still work
    np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0], n: np.int32(1)}), [3.0, 5.0])
    np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, np.float64), n: 0}), [2.0, 2.0])
    np.testing.assert_array_equal(sess.run(y, {x: np.ones(4, np.float32)[::2], n: 0}), [2.0, 2.0])
    np.testing.assert_array_equal(sess.run(y, good), [5.0, 5.0])
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(y, {x: np.ones(2, np.float32)})     # n not fed
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(y, good)


def test_make_callable():
    g, x, y, grads = w1()
    sess = S(g)
    fn = sess.make_callable(grads, [x, y])
    for v in range(6):
        out = fn(float(v), 2.0)
        assert out == [np.float32(2 * v), np.float32(12.0)]
        assert type(out[0]) is np.float32
    with pytest.raises(ValueError, match="Expected 2 feed values, got 1"):
        fn(1.0)
    with pytest.raises(ValueError, match="Cannot feed value of shape"):
        fn(np.ones(2, np.float32), 1.0)
    assert fn(np.float32(1.0), np.array(1.0, np.float32)) == [2.0, 3.0]
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        fn(1.0, 2.0)


def test_runner_with_variables_and_graph_growth():
    g = tf.Graph()
    with g.as_default():
        v = tf.compat.v1.Variable(np.arange(4, dtype=np.float32))
        upd = v.assign_add(tf.ones(4) * 2.0)
        init = tf.compat.v1.global_variables_initializer()
    sess = S(g)
    sess.run(init)
    results = [sess.run(upd) for _ in range(5)]
    for k, r in enumerate(results, 1):
        np.testing.assert_array_equal(r, np.arange(4) + 2.0 * k)
    np.testing.assert_array_equal(sess.run(v), np.arange(4) + 10.0)
    with g.as_default():
        w = v * 3.0       # the graph grows: runners re-validate and rebuild
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(w), (np.arange(4) + 10.0) * 3)
    # clear_cache invalidates runners too
    tf.clear_cache()
    np.testing.assert_array_equal(sess.run(w), (np.arange(4) + 10.0) * 3)
    assert tf.cache_info()["compiles"] == 1


def test_mutated_fetch_list_and_feed_order():
    g, x, y, grads = w1()
    sess = S(g)
    fetches = list(grads)
    for _ in range(3):
        assert sess.run(fetches, {x: 1.0, y: 2.0}) == [2.0, 12.0]
    fetches.reverse()
    assert sess.run(fetches, {x: 1.0, y: 2.0}) == [12.0, 2.0]
    for _ in range(3):
        assert sess.run(fetches, {y: 2.0, x: 1.0}) == [12.0, 2.0]
        assert sess.run(fetches, {x: 1.0, y: 2.0}) == [12.0, 2.0]


def test_threads_share_a_session():
    import threading
    g, x, y, grads = w1()
    sess = S(g)
    errs = []

    def work(k):
        try:
            for i in range(200):
                a, b = float(k), float(i % 7)
                out = sess.run(grads, {x: a, y: b})
                assert out == [np.float32(2 * a), np.float32(3 * b * b)], (k, i, out)
        except Exception as e:  # noqa: BLE001
            errs.append(e)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errs, errs


def test_clear_cache_gc_then_compile_again_does_not_crash():
    # Sharing one TargetMachine between MCJIT engines made the engine own and
    # free it: clear_cache() + gc.collect() freed the TM under the next compile.
    r = _subprocess("""
        import gc
        import numpy as np
        import jitgrad as tf
        from jitgrad.cache import set_enabled
        set_enabled(False)
        g1 = tf.Graph()
        with g1.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [4])
            y = tf.reduce_sum(tf.tanh(x) * x)
            gy = tf.gradients(y, x)[0]
        s1 = tf.compat.v1.Session(graph=g1)
        a = np.linspace(-1, 1, 4).astype(np.float32)
        first = s1.run([y, gy], {x: a})
        for _ in range(3):
            tf.clear_cache()
            gc.collect()
            g2 = tf.Graph()
            with g2.as_default():
                p = tf.compat.v1.placeholder(tf.float32, [3])
                q = tf.reduce_sum(tf.exp(p) * 2.0)
                gq = tf.gradients(q, p)[0]
            b = np.ones(3, np.float32)
            out = tf.compat.v1.Session(graph=g2).run(gq, {p: b})
            assert np.allclose(out, 2 * np.exp(b)), out
            again = s1.run([y, gy], {x: a})
            assert again[0] == first[0] and np.array_equal(again[1], first[1])
            del g2, out
            gc.collect()
        s1 = None
        gc.collect()
        tf.clear_cache()
        gc.collect()
        print("OK", tf.cache_info()["compiles"])
    """)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "OK" in r.stdout


def test_import_is_lazy():
    r = _subprocess("""
        import sys
        import jitgrad
        heavy = [m for m in ("llvmlite", "llvmlite.binding", "jitgrad.compiler", "jitgrad.codegen.kernel",
                             "jitgrad.passes.pipeline", "ml_dtypes", "distributed")
                 if m in sys.modules]
        print("HEAVY", heavy)
    """)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout, r.stdout


def test_dispatch_hooks_are_installed_and_the_compiler_only_on_first_use():
    """jitgrad/dispatch.py: eager.py and tape.py install theirs on import; the compiled
    executor is a stub until the first compiled run puts jitgrad.compiler's functions there."""
    r = _subprocess("""
        import sys
        import jitgrad as tf
        from jitgrad import dispatch, eager, tape
        assert dispatch.eager_execute is eager.execute and dispatch.batch_execute is tape._batch_execute
        assert dispatch.eager_types == {tf.EagerTensor, eager.BatchedTensor} and dispatch.eager_tensor is tf.EagerTensor
        assert dispatch.make_runner is None and "jitgrad.compiler" not in sys.modules
        stub = dispatch.compiled_execute
        g = tf.Graph()
        with g.as_default():
            y = tf.constant(3.0) * 2.0
        assert tf.compat.v1.Session(graph=g).run(y) == 6.0
        from jitgrad import compiler, fast_runner
        assert stub is not compiler.execute and dispatch.compiled_execute is compiler.execute
        assert dispatch.make_runner is fast_runner.runner_for
        print("OK")
    """)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


WARM = """
import sys, json
import numpy as np
import jitgrad as tf
rng = np.random.default_rng(0)
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [8, 5])
    w = tf.constant(rng.standard_normal((5, 3)).astype("float32"))
    h = tf.nn.relu(tf.matmul(x, w))
    loss = tf.reduce_mean(tf.square(h - 1.0)) + tf.reduce_sum(tf.stop_gradient(w) * 0.0)
    grads = tf.gradients(loss, [w, x])
out = tf.compat.v1.Session(graph=g).run([loss] + grads, {x: np.ones((8, 5), np.float32)})
print(json.dumps({"info": dict(tf.cache_info()), "loss": float(out[0]),
                  "passes": "jitgrad.passes.pipeline" in sys.modules,
                  "codegen": "jitgrad.codegen.kernel" in sys.modules}))
"""


def test_warm_start_skips_passes_and_codegen(tmp_path):
    import json
    env = {"JITGRAD_CACHE_DIR": str(tmp_path / "cache"), "JITGRAD_CACHE": "1"}
    runs = []
    for _ in range(2):
        r = _subprocess(WARM, env)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["info"]["compiles"] == 1 and cold["passes"] and cold["codegen"]
    assert warm["info"]["compiles"] == 0 and warm["info"]["disk_hits"] == 1
    assert not warm["passes"] and not warm["codegen"]
    assert warm["loss"] == cold["loss"]


def test_pre_pass_key_shares_kernels_when_only_constants_differ():
    outs = []
    for c in (0.1, 0.7, 1.3):
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [5])
            y = tf.reduce_sum(tf.sin(x) * tf.constant(c))
        outs.append(S(g).run(y, {x: np.ones(5, np.float32)}))
    np.testing.assert_allclose(outs, [np.sin(1.0) * 5 * c for c in (0.1, 0.7, 1.3)], rtol=1e-5)
    assert tf.cache_info()["compiles"] == 1
    # different private attrs (aggregation method) give different pre-pass keys but correct results
    for m in (tf.AggregationMethod.ADD_N, tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [])
            y = x * x + tf.sin(x) * x
            (gx,) = tf.gradients(y, [x], aggregation_method=m)
        assert np.isclose(S(g).run(gx, {x: 0.5}), 2 * 0.5 + np.cos(0.5) * 0.5 + np.sin(0.5))
    gc.collect()


# ---------------------------------------------------------------- runners for loops
def _general_path_forbidden(monkeypatch):
    """From here on, a run that misses its runner fails (the general path raises)."""
    from jitgrad import dispatch

    def general_path(*a, **k):
        raise AssertionError("the run took the general path, not its fast runner")
    monkeypatch.setattr(dispatch, "compiled_execute", general_path)


def _interpreted(g, fetch, feed):
    return tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="interpret")).run(fetch, feed)


def test_a_loop_with_a_fed_but_unused_placeholder_runs_through_the_runner(monkeypatch):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4])     # fed, read by nothing the fetch needs
        n = tf.compat.v1.placeholder(tf.int32, [])
        a = tf.while_loop(lambda j, a: j < n, lambda j, a: (j + 1, a * 1.5 + 1.0), [0, tf.ones([4])])[1]
    sess = S(g)
    xv = np.zeros(4, np.float32)
    for _ in range(2):
        sess.run(a, {x: xv, n: 1})
    _general_path_forbidden(monkeypatch)
    for k in (0, 1, 3):
        expected = np.ones(4, np.float32)
        for _ in range(k):
            expected = expected * np.float32(1.5) + np.float32(1.0)
        np.testing.assert_array_equal(sess.run(a, {x: xv, n: k}), expected)


def test_outputs_shaped_at_run_time_run_through_the_runner(monkeypatch):
    """A TensorArray a loop appends to (fetched stacked: its rows are known when the
    kernel has run) and a cond whose branches differ in shape: the runner reads their
    descriptors as run_plan does (dynamic_outputs.py), each run's own copy."""
    g = tf.Graph()
    with g.as_default():
        w = tf.compat.v1.placeholder(tf.float32, [3])
        n = tf.compat.v1.placeholder(tf.int32, [])
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(i, a, ta):
            a = a * w + 1.0
            return i + 1, a, ta.write(i, a)
        states = tf.while_loop(lambda i, a, ta: i < n, body, [0, tf.ones([3]), ta])[2].stack()
        shaped = tf.cond(n > 2, lambda: tf.concat([w, w], 0), lambda: w * 2.0)
    sess = S(g)
    wv = np.array([0.5, -1.0, 2.0], np.float32)
    for _ in range(2):
        sess.run([states, shaped], {w: wv, n: 2})
    _general_path_forbidden(monkeypatch)
    runs = [(k, sess.run([states, shaped], {w: wv, n: k})) for k in (0, 4, 1, 3, 4)]
    monkeypatch.undo()
    for k, (sv, cv) in runs:
        expected = _interpreted(g, [states, shaped], {w: wv, n: k})
        assert sv.shape == (k, 3) and cv.shape == ((6,) if k > 2 else (3,))
        np.testing.assert_array_equal(sv, expected[0])
        np.testing.assert_array_equal(cv, expected[1])
    assert not np.shares_memory(runs[1][1][0], runs[4][1][0])   # (each run copies its rows out)
    np.testing.assert_array_equal(runs[1][1][0], runs[4][1][0])


def test_python_list_feeds_run_through_the_runner_with_the_general_paths_checks(monkeypatch):
    """feed_dict={x: [..]} each run (a Python list, as TF tutorials feed) is converted by the
    runner itself instead of missing to the general path every time; a bad list still gets
    Session.run's error (a list of the wrong length is a ValueError); a fraction fed to an int
    placeholder is cast as TF's Session casts it (numpy's truncation: TF 2.21 gives 1 for 1.5)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        k = tf.compat.v1.placeholder(tf.int32, [2])
        y = x * 2.0 + tf.reduce_sum(tf.cast(k, tf.float32))
    sess = S(g)
    for _ in range(2):
        sess.run(y, {x: [1.0, 2.0, 3.0], k: [1, 2]})
    _general_path_forbidden(monkeypatch)
    np.testing.assert_array_equal(sess.run(y, {x: [0.5, -1.0, 4.0], k: [3, 4]}),
                                  np.array([8.0, 5.0, 15.0], np.float32))
    np.testing.assert_array_equal(sess.run(y, {x: (1, 2, 3), k: (0, 0)}), np.array([2.0, 4.0, 6.0], np.float32))
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\)"):
        sess.run(y, {x: [1.0, 2.0, 3.0], k: [1, 2, 3]})
    np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0, 3.0], k: [1.5, 2.0]}), np.array([5.0, 7.0, 9.0], np.float32))
