"""A catalogue of bad inputs: each raises the exception type TensorFlow 2.21 raises for it.

The expected types were found by running the same code against tensorflow-cpu 2.21
(graph mode through tf.compat.v1.Session, and eagerly); TF is not needed to run this.
Runs through a Session are checked in both execution modes.  Deliberate differences
(jitgrad refuses feeds TF would silently truncate or reinterpret: 1.5 into an int32
placeholder, bools into floats, complex into floats) are in test_compiler_hotpath.py.
"""
import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import FailedPreconditionError, InvalidArgumentError

v1 = tf.compat.v1
IAE, FPE = InvalidArgumentError, FailedPreconditionError


def _basic():
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    i = v1.placeholder(tf.int32, [None], name="i")
    return dict(x=x, i=i, y=tf.reduce_sum(x * 2.0), yi=tf.reduce_sum(i))


ONES = np.ones((1, 3), np.float32)

# name -> (expected type, fn(session, env) run with the graph of _basic() as default)
GRAPH = {
    # feeds
    "feed an object": (TypeError, lambda s, e: s.run(e["y"], {e["x"]: object()})),
    "feed an array of objects": (TypeError, lambda s, e: s.run(e["y"], {e["x"]: np.array([[object()] * 3])})),
    "feed a dict as a value": (TypeError, lambda s, e: s.run(e["y"], {e["x"]: {"a": 1}})),
    "feed a string": (ValueError, lambda s, e: s.run(e["y"], {e["x"]: "abc"})),
    "feed a ragged list": (ValueError, lambda s, e: s.run(e["y"], {e["x"]: [[1, 2, 3], [4, 5]]})),
    "feed a wrong shape": (ValueError, lambda s, e: s.run(e["y"], {e["x"]: np.ones((2, 4))})),
    "feed a wrong rank": (ValueError, lambda s, e: s.run(e["y"], {e["x"]: np.ones(3)})),
    "feed a tensor": (TypeError, lambda s, e: s.run(e["y"], {e["x"]: e["y"]})),
    "feed key naming nothing": (TypeError, lambda s, e: s.run(e["y"], {"nope:0": ONES})),
    "feed key an int": (TypeError, lambda s, e: s.run(e["y"], {5: ONES})),
    "feed_dict a list of pairs": (TypeError, lambda s, e: s.run(e["y"], [(e["x"], ONES)])),
    "feed missing": (IAE, lambda s, e: s.run(e["y"])),
    # fetches
    "fetch None": (TypeError, lambda s, e: s.run(None)),
    "fetch an int": (TypeError, lambda s, e: s.run(5, {e["x"]: ONES})),
    "fetch an int in a list": (TypeError, lambda s, e: s.run([e["y"], 3], {e["x"]: ONES})),
    "fetch a float in a dict": (TypeError, lambda s, e: s.run({"a": 3.5})),
    "fetch a name naming nothing": (ValueError, lambda s, e: s.run("nope:0")),
    "fetch a bad output index": (ValueError, lambda s, e: s.run("x:7")),
    "run a closed session": (RuntimeError, lambda s, e: (s.close(), s.run(e["y"], {e["x"]: ONES}))),
    # gradients
    "grad_ys of another length": (ValueError, lambda s, e: tf.gradients([e["y"]], [e["x"]], grad_ys=[1.0, 2.0])),
    "grad_ys of another shape": (ValueError, lambda s, e: tf.gradients(e["y"], e["x"], grad_ys=tf.ones([2]))),
    "grad_ys of another float dtype": (TypeError,
                                       lambda s, e: tf.gradients(e["y"], e["x"], grad_ys=tf.ones([], tf.float64))),
    "grad_ys of an int dtype": (TypeError, lambda s, e: tf.gradients(e["y"], e["x"], grad_ys=tf.ones([], tf.int32))),
    # axes and shape arguments
    "reduction axis out of range": (ValueError, lambda s, e: tf.reduce_sum(e["x"], axis=5)),
    "reduction axis a float": (TypeError, lambda s, e: tf.reduce_sum(e["x"], axis=0.5)),
    "reduction axis a string": (TypeError, lambda s, e: tf.reduce_sum(e["x"], axis="a")),
    "duplicate reduction axes at run time": (IAE, lambda s, e: s.run(
        tf.reduce_sum(e["p"], axis=[0, 0]), {e["p"]: np.ones((2, 3))})),
    "expand_dims axis a float": (TypeError, lambda s, e: tf.expand_dims(tf.ones([2]), 0.5)),
    "expand_dims axis out of range": (ValueError, lambda s, e: tf.expand_dims(tf.ones([2, 3]), 5)),
    "unstack axis out of range": (ValueError, lambda s, e: tf.unstack(tf.ones([2, 3]), axis=3)),
    "squeeze a dim that is not 1": (ValueError, lambda s, e: tf.squeeze(tf.ones([2, 3]), [0])),
    "argmax axis out of range": (ValueError, lambda s, e: tf.argmax(tf.ones([2, 3]), 4)),
    "slice index out of range": (ValueError, lambda s, e: tf.ones([2, 3])[5]),
    "range with delta 0": (ValueError, lambda s, e: tf.range(0, 5, 0)),
    "reshape to another size": (ValueError, lambda s, e: tf.reshape(tf.ones([2, 3]), [4, 2])),
    "reshape with a float dim": (TypeError, lambda s, e: tf.reshape(tf.ones([2]), [2.0])),
    "reshape with a negative dim": (ValueError, lambda s, e: tf.reshape(e["x"], [-2, 3])),
    "reshape to another size at run time": (IAE, lambda s, e: s.run(tf.reshape(e["x"], [4, -1]), {e["x"]: ONES})),
    "reshape with two -1 at run time": (IAE, lambda s, e: s.run(tf.reshape(e["x"], [-1, -1]), {e["x"]: ONES})),
    # (TF 2.21 builds it, dims unknown, and its Reshape kernel raises when the graph runs)
    "reshape of a known shape with two -1": (IAE, lambda s, e: s.run(tf.reshape(tf.ones([2, 3]), [-1, -1]))),
    "tile multiples of floats": (TypeError, lambda s, e: tf.tile(tf.ones([2]), [2.0])),
    "tile multiples of another length": (ValueError, lambda s, e: tf.tile(e["x"], [2])),
    "transpose perm of another length": (ValueError, lambda s, e: tf.transpose(e["x"], [0, 1, 2])),
    "transpose with a repeated perm at run time": (IAE, lambda s, e: s.run(tf.transpose(tf.ones([2, 3]), [0, 0]))),
    "repeated reduction axes of a known shape at run time": (IAE, lambda s, e: s.run(
        tf.reduce_sum(tf.ones([2, 3]), [0, 0]))),
    # checked by TF's kernels when they run, not by its shape functions
    "segment_sum ids of another length at run time": (IAE, lambda s, e: s.run(
        tf.math.segment_sum(tf.ones([3]), tf.constant([0, 0])))),
    "unsorted_segment_sum of a negative count": (ValueError, lambda s, e: tf.math.unsorted_segment_sum(
        tf.ones([3]), [0, 0, 1], -1)),
    "cumsum axis out of range at run time": (IAE, lambda s, e: s.run(tf.cumsum(tf.ones([2]), axis=3))),
    "cumsum axis a float": (TypeError, lambda s, e: tf.cumsum(tf.ones([2]), axis=tf.constant(0.5))),
    "slice begin out of range at run time": (IAE, lambda s, e: s.run(tf.slice(tf.ones([3]), [-1], [1]))),
    "slice size past the end at run time": (IAE, lambda s, e: s.run(tf.slice(tf.ones([3]), [1], [5]))),
    "slice size below -1": (ValueError, lambda s, e: tf.slice(tf.ones([3]), [0], [-2])),
    "random shape with a negative dim": (ValueError, lambda s, e: tf.random.uniform([2, -3])),
    "softmax xent labels of another class count": (ValueError, lambda s, e: tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.ones([1, 3]), logits=tf.ones([1, 2]))),
    "softmax xent logits broadcast to the labels": (ValueError, lambda s, e: tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.ones([2, 2]), logits=tf.ones([1, 2]))),
    # shapes and dtypes of operands
    "add a string": (TypeError, lambda s, e: tf.ones([2]) + "a"),
    "concat of another rank": (ValueError, lambda s, e: tf.concat([e["x"], tf.ones([3])], 0)),
    "concat of another dim": (ValueError, lambda s, e: tf.concat([tf.ones([2, 3]), tf.ones([2, 4])], 0)),
    "concat of another dtype": (TypeError, lambda s, e: tf.concat([tf.ones([2, 3]), tf.ones([2, 3], tf.float64)], 0)),
    "concat of scalars": (ValueError, lambda s, e: tf.concat([tf.constant(1.0), tf.constant(2.0)], 0)),
    "stack of another shape": (ValueError, lambda s, e: tf.stack([tf.ones([2]), tf.ones([3])])),
    "matmul inner dims": (ValueError, lambda s, e: tf.matmul(tf.ones([2, 3]), tf.ones([2, 3]))),
    "matmul of rank 1": (ValueError, lambda s, e: tf.matmul(tf.ones([3]), tf.ones([3]))),
    "matmul int by float": (TypeError, lambda s, e: tf.matmul(tf.ones([2, 2], tf.int32), tf.ones([2, 2]))),
    "matmul inner dims at run time": (IAE, lambda s, e: s.run(tf.matmul(e["x"], e["q"]), {e["x"]: ONES,
                                                                                           e["q"]: np.ones((2, 2))})),
    "add of another dtype": (TypeError, lambda s, e: tf.ones([2]) + tf.ones([2], tf.float64)),
    "add of another shape": (ValueError, lambda s, e: tf.ones([2]) + tf.ones([3])),
    "add of another shape at run time": (IAE, lambda s, e: s.run(e["x"] + e["q"], {e["x"]: ONES,
                                                                                   e["q"]: np.ones((1, 2))})),
    "add None": (ValueError, lambda s, e: tf.ones([2]) + None),
    "add an object": (TypeError, lambda s, e: tf.ones([2]) + object()),
    "where with a float condition": (TypeError, lambda s, e: tf.where(tf.constant([1.0]), tf.constant([1.0]),
                                                                      tf.constant([2.0]))),
    "sqrt of an int": (TypeError, lambda s, e: tf.sqrt(tf.constant([1, 2]))),
    "gather with float indices": (TypeError, lambda s, e: tf.gather(e["x"], tf.constant([0.5]))),
    "gather out of range at run time": (IAE, lambda s, e: s.run(tf.gather(e["x"], e["i"]), {e["x"]: ONES,
                                                                                           e["i"]: [3]})),
    "broadcast_to an incompatible shape": (ValueError, lambda s, e: tf.broadcast_to(tf.ones([3]), [2, 4])),
    "fill with a non-scalar": (ValueError, lambda s, e: tf.fill([2], tf.constant([1.0, 2.0]))),
    "zeros of a negative dim": (ValueError, lambda s, e: tf.zeros([-1, 2])),
    "integer division by zero at run time": (IAE, lambda s, e: s.run(tf.math.floordiv(tf.constant(2),
                                                                                      tf.constant(0)))),
    # (the quotient's only reader has no elements: compiled code fused it there and never divided)
    "integer division by zero read by an empty tensor": (IAE, lambda s, e: s.run(
        e["i"] + tf.math.floordiv(2, e["yi"]), {e["i"]: np.zeros(0, np.int32)})),
    # constants, variables, placeholders
    "placeholder of a bad dtype": (TypeError, lambda s, e: v1.placeholder("foo")),
    "constant of a ragged list": (ValueError, lambda s, e: tf.constant([[1, 2], [3]])),
    "constant of an object": (TypeError, lambda s, e: tf.constant(object())),
    "constant of a string as float": (TypeError, lambda s, e: tf.constant("abc", tf.float32)),
    "variable of an object": (TypeError, lambda s, e: tf.Variable(object())),
    "assign another shape": (ValueError, lambda s, e: tf.Variable(tf.ones([2])).assign(tf.ones([3]))),
    "assign another dtype": (ValueError, lambda s, e: tf.Variable(tf.ones([2])).assign(tf.ones([2], tf.int32))),
    "read an uninitialised variable": (FPE, lambda s, e: s.run(tf.Variable(tf.ones([2])) * 2.0)),
    "placeholder_with_default of another shape": (ValueError, lambda s, e: v1.placeholder_with_default(
        np.ones(3, np.float32), [4])),
    "eval without a session": (ValueError, lambda s, e: (tf.ones([2]) * 2.0).eval()),
}

EAGER = {
    "reduction axis out of range": (IAE, lambda: tf.reduce_sum(tf.ones([2, 3]), axis=5)),
    "reduction axis a float": (TypeError, lambda: tf.reduce_sum(tf.ones([2, 3]), 0.5)),
    "duplicate reduction axes": (IAE, lambda: tf.reduce_sum(tf.ones([2, 3]), [0, 0])),
    "reshape to another size": (IAE, lambda: tf.reshape(tf.ones([2, 3]), [4, 2])),
    "reshape with two -1": (IAE, lambda: tf.reshape(tf.ones([2, 3]), [-1, -1])),
    "matmul inner dims": (IAE, lambda: tf.matmul(tf.ones([2, 3]), tf.ones([2, 3]))),
    "add of another dtype": (IAE, lambda: tf.ones([2]) + tf.ones([2], tf.float64)),
    "add of another shape": (IAE, lambda: tf.ones([2]) + tf.ones([3])),
    "add None": (ValueError, lambda: tf.ones([2]) + None),
    # numpy's astype printed the numbers as text (a "string tensor" of floats)
    "cast float to string": (tf.errors.UnimplementedError, lambda: tf.cast(tf.ones([2]), tf.string)),
    "cast bool to string": (tf.errors.UnimplementedError, lambda: tf.cast(tf.constant([True]), tf.string)),
    "cast string to float": (tf.errors.UnimplementedError, lambda: tf.cast(tf.constant(["1.5"]), tf.float32)),
    "add an object": (ValueError, lambda: tf.ones([2]) + object()),
    "constant of an object": (ValueError, lambda: tf.constant(object())),
    "constant of a ragged list": (ValueError, lambda: tf.constant([[1, 2], [3]])),
    "variable of an object": (ValueError, lambda: tf.Variable(object())),
    "assign another shape": (ValueError, lambda: tf.Variable(tf.ones([2])).assign(tf.ones([3]))),
    "assign another dtype": (ValueError, lambda: tf.Variable(tf.ones([2])).assign(tf.ones([2], tf.int32))),
    "gather out of range": (IAE, lambda: tf.gather(tf.ones([3]), [5])),
    "concat of another dim": (IAE, lambda: tf.concat([tf.ones([2, 3]), tf.ones([2, 4])], 0)),
    "transpose with a repeated perm": (IAE, lambda: tf.transpose(tf.ones([2, 3]), [0, 0])),
    "tile multiples of another length": (IAE, lambda: tf.tile(tf.ones([2, 3]), [2])),
    "broadcast_to an incompatible shape": (IAE, lambda: tf.broadcast_to(tf.ones([3]), [2, 4])),
    "squeeze a dim that is not 1": (IAE, lambda: tf.squeeze(tf.ones([2, 3]), [0])),
    "slice index out of range": (IAE, lambda: tf.ones([2, 3])[5]),
    "sqrt of an int": (IAE, lambda: tf.sqrt(tf.constant([1, 2]))),
    "where with a float condition": (IAE, lambda: tf.where(tf.constant([1.0]), tf.constant([1.0]),
                                                           tf.constant([2.0]))),
    "fill with a non-scalar": (IAE, lambda: tf.fill([2], tf.constant([1.0, 2.0]))),
    "stack of another shape": (IAE, lambda: tf.stack([tf.ones([2]), tf.ones([3])])),
    "split unevenly": (IAE, lambda: tf.split(tf.ones([5]), 2)),
    "integer division by zero": (IAE, lambda: tf.math.floordiv(tf.constant(2), tf.constant(0))),
    "argmax of an empty axis": (IAE, lambda: tf.argmax(tf.zeros([0]))),
    "convert a string to float": (TypeError, lambda: tf.convert_to_tensor("abc", tf.float32)),
    "cast to a bad dtype": (TypeError, lambda: tf.cast(tf.ones([2]), "foo")),
    "element count over int64": (IAE, lambda: tf.zeros([2 ** 40] * 3)),
    "segment_sum ids of another length": (IAE, lambda: tf.math.segment_sum(tf.ones([3]), tf.constant([0, 0]))),
    "unsorted_segment_sum of a negative count": (IAE, lambda: tf.math.unsorted_segment_sum(tf.ones([3]),
                                                                                           [0, 0, 1], -1)),
    "cumsum axis out of range": (IAE, lambda: tf.cumsum(tf.ones([2]), axis=3)),
    "cumsum axis a float": (IAE, lambda: tf.cumsum(tf.ones([2]), axis=tf.constant(0.5))),
    "cumsum axis a vector": (IAE, lambda: tf.cumsum(tf.ones([2]), axis=tf.constant([0]))),
    "slice begin out of range": (IAE, lambda: tf.slice(tf.ones([3]), [-1], [1])),
    # AddV2 adds strings: y converts with x's dtype as a hint, and the kernel finds the mismatch
    "add a string": (IAE, lambda: tf.ones([2]) + "a"),
    "add a float to an int tensor": (IAE, lambda: tf.constant([1, 2]) + 1.5),
    "add a tensor to a string": (TypeError, lambda: "a" + tf.ones([2])),
    "random shape with a negative dim": (IAE, lambda: tf.random.uniform([2, -3])),
    "softmax xent labels of another class count": (IAE, lambda: tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.constant([[1.0, 0.0, 0.0]]), logits=tf.constant([[1.0, 2.0]]))),
    "multiply by a string": (TypeError, lambda: tf.ones([2]) * "a"),
}


@pytest.mark.parametrize("mode", ["interpret", "compiled"])
@pytest.mark.parametrize("case", sorted(GRAPH))
def test_graph_mode_error_types(case, mode):
    want, fn = GRAPH[case]
    g = tf.Graph()
    with g.as_default():
        env = _basic()
        env["p"] = v1.placeholder(tf.float32, None, name="p")
        env["q"] = v1.placeholder(tf.float32, [None, None], name="q")
        sess = v1.Session(graph=g, config={"jitgrad_mode": mode})
        with pytest.raises(Exception) as info:
            fn(sess, env)
    assert type(info.value) is want, f"{case}: {type(info.value).__name__}: {info.value}"


@pytest.mark.parametrize("case", sorted(EAGER))
def test_eager_error_types(case):
    want, fn = EAGER[case]
    with pytest.raises(Exception) as info:
        fn()
    assert type(info.value) is want, f"{case}: {type(info.value).__name__}: {info.value}"
