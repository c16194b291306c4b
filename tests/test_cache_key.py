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
