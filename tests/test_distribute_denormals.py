"""A Dask worker runs a shipped program in the client's flush-denormals mode, not the
mode its own process started in (jitgrad/distribute/worker.py Bundle.flush_denormals).

The worker is a fresh Python process (what a LocalCluster worker is) given the pickled
Bundle; its own mode comes from JITGRAD_FLUSH_DENORMALS. Expected values: 1e-39 * 2 in
float32 is the denormal 2e-39 (numpy / IEEE) with the mode off, and 0 with FTZ + DAZ
(TF's CPU numerics) with it on; either way the shipped kernel is found (no compile).
"""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import kernel_export
from jitgrad.distribute import worker as dworker

_WORKER = """
import pickle, sys, numpy as np, jitgrad as tf
from jitgrad.distribute import worker as dworker
b = pickle.load(open(sys.argv[1], 'rb'))
dworker.install(b)
out, notes = dworker.run_replica('s', b.token, None, [np.full(3, 1e-39, np.float32)])
print(repr(float(out[0][0])), tf.cache_info()['compiles'], tf.config.get_flush_denormals())
"""


@pytest.mark.parametrize("client_flush", [False, True])
def test_worker_runs_in_the_clients_mode(client_flush, tmp_path):
    tf.config.set_flush_denormals(client_flush)       # (conftest restores the mode)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        y = x * 2.0
    sess = tf.compat.v1.Session(graph=g)
    feed = {x: np.full(3, 1e-39, np.float32)}
    want = 0.0 if client_flush else float(np.float32(1e-39) * np.float32(2.0))
    assert want == 0.0 or 0 < want < np.finfo(np.float32).tiny     # (the claim is about a denormal)
    np.testing.assert_array_equal(sess.run(y, feed), np.full(3, want, np.float32))
    bundle = dworker.Bundle.make(g, [x], [y], 1, [kernel_export.export_kernel(sess, [y], feed)])
    path = tmp_path / "bundle.pkl"
    path.write_bytes(pickle.dumps(bundle))
    env = dict(os.environ, JITGRAD_CACHE="0", JITGRAD_FLUSH_DENORMALS="1" if not client_flush else "0")
    r = subprocess.run([sys.executable, "-c", _WORKER, str(path)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    got, compiles, mode = r.stdout.split()
    assert float(got) == want and int(compiles) == 0 and mode == str(client_flush)
