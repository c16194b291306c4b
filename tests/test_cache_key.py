"""The kernel cache key: what it covers (tests/test_disk_cache.py covers the store itself)."""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_GRADIENT_RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jitgrad as tf
    name, extra = sys.argv[1], sys.argv[2]
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3])
        y = tf.reduce_sum(x * x + tf.sin(x) * x)
        (gx,) = tf.gradients(y, x, name=name)
        if extra == "unfetched":   # a second gradient call nothing fetched reads
            tf.gradients(y * y, x, name="other", aggregation_method=tf.AggregationMethod.EXPERIMENTAL_TREE)
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    out = tf.compat.v1.Session(graph=g).run(gx, {x: xv})
    info = tf.cache_info()
    print(json.dumps({"out": out.tolist(), "compiles": info["compiles"], "disk_hits": info["disk_hits"]}))
""")


def _run_gradient_process(cache_dir, name, extra="none"):
    env = dict(os.environ, PYTHONPATH=ROOT, JITGRAD_CACHE_DIR=str(cache_dir))
    env.pop("JITGRAD_CACHE", None)
    env.pop("JITGRAD_MODE", None)
    r = subprocess.run([sys.executable, "-c", _GRADIENT_RUN, name, extra], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_renaming_a_gradients_call_hits_the_disk_cache_in_a_new_process(tmp_path):
    """Regression: the key held every tf.gradients call's name scope (the graph's per-call
    aggregation records), so name='g1' compiled again where name='gradients' had been cached,
    and so did any graph with one more, unfetched, gradient call."""
    import numpy as np
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    expected = 2 * xv + np.sin(xv) + xv * np.cos(xv)        # d/dx (x^2 + x sin x)
    first = _run_gradient_process(tmp_path, "gradients")
    assert first["compiles"] == 1 and first["disk_hits"] == 0
    np.testing.assert_allclose(first["out"], expected, rtol=1e-6)
    for name, extra in (("g1", "none"), ("g2", "unfetched")):
        again = _run_gradient_process(tmp_path, name, extra)
        assert (again["compiles"], again["disk_hits"]) == (0, 1), (name, extra, again)
        assert again["out"] == first["out"]


# ----------------------------------------------------------------------------- components
import logging  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jitgrad as tf  # noqa: E402
from jitgrad import compiler  # noqa: E402
from jitgrad.cache import key as cache_key  # noqa: E402

FP = {"format": 1, "jitgrad": "x", "llvmlite": "0.50.0", "llvm": "22", "triple": "x86_64-unknown-linux-gnu",
      "cpu": "znver4", "features": "+avx512f,+avx2"}


def _pre_program(build, shape=(3,), dtype=tf.float32):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dtype, shape)
        y = build(x)
    sess = tf.compat.v1.Session(graph=g)
    fed = sess._fed_list({x: np.ones(shape, dtype.np)})
    return compiler.build_pre_program(sess, [y], fed)


def _changed(a, b, fp_a=FP, fp_b=FP):
    return cache_key.pre_pass_key(a, fp_a).changed_from(cache_key.pre_pass_key(b, fp_b))


def test_each_component_changes_alone():
    base = _pre_program(lambda x: tf.reduce_sum(x * 3.7))
    # a constant's value is a runtime argument: another "other" value is the same kernel
    same = _pre_program(lambda x: tf.reduce_sum(x * 4.2))
    assert cache_key.pre_pass_key(base, FP).hex == cache_key.pre_pass_key(same, FP).hex
    assert _changed(_pre_program(lambda x: tf.reduce_sum(x * 1.0)), base) == ["constants"]
    assert _changed(_pre_program(lambda x: tf.reduce_sum(x * 3.7), shape=(4,)), base) == ["shapes"]
    assert _changed(_pre_program(lambda x: tf.reduce_sum(x * 3.7), dtype=tf.float64), base) == ["dtypes"]
    assert _changed(_pre_program(lambda x: tf.reduce_sum(x + 3.7)), base) == ["structure"]
    assert _changed(base, base, fp_a=dict(FP, cpu="skylake-avx512")) == ["host"]
    assert _changed(base, base, fp_a=dict(FP, features="+avx2")) == ["host"]
    assert _changed(base, base, fp_a=dict(FP, llvmlite="0.51.0")) == ["toolchain"]
    # pre- and post-pass keys of one program differ in what the codegen component covers
    assert cache_key.pre_pass_key(base, FP).changed_from(cache_key.post_pass_key(base, FP)) == ["codegen"]


def test_private_attrs_are_in_the_pre_pass_key_only():
    """The passes read AddN's _aggregation (the pre-pass key must cover it); after them the
    code generator does not (the post-pass key need not)."""
    import dataclasses
    add_n = _pre_program(lambda x: tf.gradients(x * x + tf.sin(x) * x, x)[0])
    sums = [i for i, n in enumerate(add_n.nodes) if n.op == "AddN"]
    assert sums and all(add_n.nodes[i].attrs["_aggregation"] == "ADD_N" for i in sums)
    nodes = list(add_n.nodes)
    for i in sums:
        nodes[i] = dataclasses.replace(nodes[i], attrs=dict(nodes[i].attrs, _aggregation="EXPERIMENTAL_TREE"))
    tree = dataclasses.replace(add_n, nodes=nodes)
    assert _changed(add_n, tree) == ["structure"]
    assert cache_key.post_pass_key(add_n, FP).hex == cache_key.post_pass_key(tree, FP).hex


def test_recompile_log_names_the_changed_component(monkeypatch, caplog):
    monkeypatch.setenv("JITGRAD_LOG_RECOMPILES", "1")
    tf.clear_cache()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        y = tf.reduce_sum(tf.exp(x) * 1.25)
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode="compiled"))
    with caplog.at_level(logging.WARNING, logger="jitgrad.recompiles"):
        assert sess.run(y, {x: np.zeros(3, np.float32)}) == pytest.approx(3.75)
        caplog.clear()
        assert sess.run(y, {x: np.zeros(5, np.float32)}) == pytest.approx(6.25)
    msgs = [r.getMessage() for r in caplog.records if r.name == "jitgrad.recompiles"]
    assert len(msgs) == 1 and "in: shapes" in msgs[0] and "(3,)" in msgs[0] and "(5,)" in msgs[0]
    # on demand: the run just compiled is in memory; a new length would compile, and says why
    assert "is in memory" in tf.explain_recompile(y, {x: np.zeros(5, np.float32)}, session=sess)
    report = tf.explain_recompile(y, {x: np.zeros(7, np.float32)}, session=sess)
    assert "in: shapes" in report and "(7,)" in report
    # without the variable, compiles are silent
    monkeypatch.delenv("JITGRAD_LOG_RECOMPILES")
    with caplog.at_level(logging.WARNING, logger="jitgrad.recompiles"):
        caplog.clear()
        sess.run(y, {x: np.zeros(9, np.float32)})
    assert not [r for r in caplog.records if r.name == "jitgrad.recompiles"]


def test_explain_lists_the_key_components():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2])
        y = tf.reduce_sum(x * x)
    text = str(tf.compat.v1.Session(graph=g).explain(y, {x: np.ones(2, np.float32)}))
    for component in cache_key.COMPONENTS:
        assert f"\n  {component} " in text
    assert "args [(2,)] (1)" in text


def test_the_same_program_over_new_variables_shares_its_kernel():
    """Which variables a program reads and writes is bound by the plan, not the machine code:
    a second model of the same shape reuses the first one's kernel (0 compiles)."""
    import numpy as np
    import jitgrad as tf

    def model_and_step():
        w = tf.Variable(np.ones((3, 2), np.float32))
        b = tf.Variable(np.zeros(2, np.float32))

        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.tanh(tf.matmul(x, w) + b))
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            return loss
        return w, step

    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    w1, step1 = model_and_step()
    first = [float(step1(x)) for _ in range(2)]
    before = tf.cache_info()["compiles"]
    w2, step2 = model_and_step()
    second = [float(step2(x)) for _ in range(2)]
    assert tf.cache_info()["compiles"] == before
    assert first == second                                   # same start, same updates
    np.testing.assert_array_equal(w1.numpy(), w2.numpy())
    step1(x)                                                 # each step still updates its own variables
    assert not np.array_equal(w1.numpy(), w2.numpy())
