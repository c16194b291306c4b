"""tf.config, tf.device, tf.timestamp, tf.broadcast_static_shape /
broadcast_dynamic_shape (issue 17, item 2)."""
import time

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.codegen import parallel


def test_devices():
    cpus = tf.config.list_physical_devices("CPU")
    assert [d.device_type for d in cpus] == ["CPU"] and cpus[0].name == "/physical_device:CPU:0"
    assert tf.config.list_physical_devices("GPU") == []
    assert tf.config.experimental.list_physical_devices("GPU") == []
    assert tf.config.list_physical_devices() == cpus
    assert [d.name for d in tf.config.list_logical_devices()] == ["/device:CPU:0"]
    with pytest.raises(ValueError):
        tf.config.experimental.set_memory_growth(cpus[0], True)
    assert tf.config.get_soft_device_placement() is True
    tf.config.set_soft_device_placement(False)
    assert tf.config.get_soft_device_placement() is False
    tf.config.set_soft_device_placement(True)
    tf.config.experimental.enable_op_determinism()


def test_threads_set_jitgrad_thread_count():
    saved = parallel.num_threads()
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        assert parallel.num_threads() == 1
        assert tf.config.threading.get_intra_op_parallelism_threads() == 1
        tf.config.threading.set_intra_op_parallelism_threads(2)
        assert parallel.num_threads() == 2
        tf.config.threading.set_inter_op_parallelism_threads(3)
        assert tf.config.threading.get_inter_op_parallelism_threads() == 3
    finally:
        tf.config.threading.set_intra_op_parallelism_threads(0)   # 0: back to the default
        tf.config.threading.set_inter_op_parallelism_threads(0)
        parallel.set_num_threads(saved)
    assert tf.config.threading.get_intra_op_parallelism_threads() == 0


def test_run_functions_eagerly():
    seen = []

    @tf.function
    def f(x):
        seen.append(tf.executing_eagerly())
        return x * 2

    assert tf.config.functions_run_eagerly() is False
    tf.config.run_functions_eagerly(True)
    try:
        assert tf.config.functions_run_eagerly() is True
        assert f(tf.constant(3.0)).numpy() == 6.0
        assert f(tf.constant(4.0)).numpy() == 8.0
        assert seen == [True, True] and f.experimental_get_tracing_count() == 0
    finally:
        tf.config.run_functions_eagerly(False)
    assert f(tf.constant(3.0)).numpy() == 6.0
    assert seen[-1] is False and f.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("name", ["/CPU:0", "cpu:0", "/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:0",
                                  "/GPU:0", "gpu", "", None])
def test_device_accepts_tf_names(name):
    # TF 2 places ops on the CPU when the named device does not exist (soft placement)
    with tf.device(name):
        y = tf.constant([1.0, 2.0]) * 3
    np.testing.assert_array_equal(y.numpy(), [3.0, 6.0])
    assert y.device.endswith("CPU:0")


@pytest.mark.parametrize("name", ["foo", "/CPU:0/GPU:0", "/device:CPU:x"])
def test_device_rejects_bad_names(name):
    with pytest.raises(ValueError):
        with tf.device(name):
            pass


def test_device_in_graph_mode(graph_mode):
    g = tf.Graph()
    with g.as_default(), tf.device("/cpu:0"):
        y = tf.constant(2.0) + 1
    assert tf.compat.v1.Session(graph=g).run(y) == 3.0


def test_timestamp_eager_graph_function(graph_mode):
    t0 = time.time()
    ts = tf.timestamp()
    assert ts.dtype == tf.float64 and ts.shape == ()
    assert t0 - 1 <= float(ts) <= time.time() + 1
    g = tf.Graph()
    with g.as_default():
        t = tf.timestamp()
        d = t - t   # both reads of one op in one run are equal
    with tf.compat.v1.Session(graph=g) as sess:
        a, z = sess.run([t, d])
        time.sleep(0.01)
        b = sess.run(t)
    assert t0 - 1 <= a <= b and b - a >= 0.009 and z == 0.0   # read when the graph runs, every run

    @tf.function
    def f():
        return tf.timestamp()
    f1 = float(f())
    time.sleep(0.01)
    assert float(f()) - f1 >= 0.009


def test_broadcast_static_shape():
    assert tf.broadcast_static_shape(tf.TensorShape([2, 1]), tf.TensorShape([3])).as_list() == [2, 3]
    assert tf.broadcast_static_shape(tf.TensorShape([None, 1]), tf.TensorShape([4])).as_list() == [None, 4]
    with pytest.raises(ValueError):
        tf.broadcast_static_shape(tf.TensorShape([2]), tf.TensorShape([3]))


def test_broadcast_dynamic_shape():
    s = tf.broadcast_dynamic_shape(tf.constant([2, 1, 5]), tf.constant([4, 1]))
    assert s.dtype == tf.int32
    np.testing.assert_array_equal(s.numpy(), np.broadcast_shapes((2, 1, 5), (4, 1)))
    np.testing.assert_array_equal(tf.broadcast_dynamic_shape(tf.shape(tf.zeros([3, 1])), [1, 7]).numpy(), [3, 7])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.broadcast_dynamic_shape([2], [3])
