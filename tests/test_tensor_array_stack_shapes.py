"""A TensorArray whose elements differ in shape (infer_shape=False, or split into blocks of
different lengths): stack / gather / concat raise TF 2.21's error type and message (written
down from TF for the same programs). Eager: Pack's; a graph: the TensorList kernel's merge
of the written elements' shapes. A write against an inferred element shape: ValueError."""
import numpy as np
import pytest

import jitgrad as tf

tf1 = tf.compat.v1
IAE = tf.errors.InvalidArgumentError


def _ta(*shapes, size=None):
    ta = tf.TensorArray(tf.float32, size=size or len(shapes), infer_shape=False)
    for k, s in enumerate(shapes):
        if s is not None:
            ta = ta.write(k, tf.zeros(s))
    return ta


@pytest.mark.parametrize("shapes, message", [
    (([3], [2]), "Shapes of all inputs must match: values[0].shape = [3] != values[1].shape = [2]"),
    (([3], [3], [2]), "Shapes of all inputs must match: values[0].shape = [3] != values[2].shape = [2]"),
    (([3, 1], [2]), "Shapes of all inputs must match: values[0].shape = [3,1] != values[1].shape = [2]"),
])
def test_eager_stack_and_gather(shapes, message):
    with pytest.raises(IAE) as e:
        _ta(*shapes).stack()
    assert e.value.message == message
    with pytest.raises(IAE) as e:
        _ta(*shapes).gather(list(range(len(shapes))))
    assert e.value.message == message


@pytest.mark.parametrize("shapes, message", [
    (([3], [2]), "PartialTensorShape: Incompatible shapes during merge: [3] vs. [2]"),
    (([3], [3], [2]), "PartialTensorShape: Incompatible shapes during merge: [3] vs. [2]"),
    (([3], None, [2]), "PartialTensorShape: Incompatible shapes during merge: [3] vs. [2]"),   # unwritten: skipped
    (([3, 1], [2]), "PartialTensorShape: Incompatible ranks during merge: 2 vs. 1"),
])
def test_graph_stack(shapes, message):
    with tf.Graph().as_default():
        with pytest.raises(IAE) as e:
            _ta(*shapes).stack()
    assert e.value.message == message


def test_graph_concat_compares_all_but_the_first_dimension():
    with tf.Graph().as_default():
        ta = tf.TensorArray(tf.float32, size=3).split(np.zeros((6, 2), np.float32), [1, 2, 3])
        np.testing.assert_array_equal(tf1.Session().run(ta.concat()), np.zeros((6, 2)))
        with pytest.raises(IAE) as e:
            ta.write(0, tf.zeros([5, 3])).concat()
    assert e.value.message == "PartialTensorShape: Incompatible shapes during merge: [3] vs. [2]"


def test_graph_stack_of_split_blocks_of_different_lengths():
    with tf.Graph().as_default():
        ta = tf.TensorArray(tf.float32, size=3).split(np.zeros((6, 2), np.float32), [1, 2, 3])
        with pytest.raises(IAE) as e:
            ta.stack()
    assert e.value.message == "PartialTensorShape: Incompatible shapes during merge: [1,2] vs. [2,2]"


def test_function_stack_raises_tfs_graph_message():
    @tf.function
    def f():
        return _ta([3], [2]).stack()

    with pytest.raises(IAE, match=r"PartialTensorShape: Incompatible shapes during merge: \[3\] vs. \[2\]"):
        f()


def test_write_against_the_inferred_element_shape():
    with pytest.raises(ValueError, match=r"Incompatible shape for value \(\(2,\)\), expected \(\(3,\)\)"):
        tf.TensorArray(tf.float32, size=2).write(0, tf.zeros([3])).write(1, tf.zeros([2]))
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"Inconsistent shapes: saw \(2,\) but expected \(3,\)"):
            tf.TensorArray(tf.float32, size=2).write(0, tf.zeros([3])).write(1, tf.zeros([2]))
