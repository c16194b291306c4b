"""tf.nest's rules, checked against what TF 2.x documents for each call."""
import collections

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import nest

Point = collections.namedtuple("Point", "x y")


def test_dicts_flatten_by_sorted_key_whatever_the_insertion_order():
    assert nest.flatten({"b": 1, "a": 2}) == [2, 1]
    assert nest.flatten({"a": 2, "b": 1}) == [2, 1]


def test_pack_keeps_the_structures_own_key_order():
    out = nest.pack_sequence_as({"b": 0, "a": 0}, [1, 2])
    assert list(out.items()) == [("b", 2), ("a", 1)]
    od = nest.pack_sequence_as(collections.OrderedDict([("z", 0), ("y", 0)]), [1, 2])
    assert type(od) is collections.OrderedDict and list(od.items()) == [("z", 2), ("y", 1)]


def test_leaves_and_containers():
    arr = np.arange(3)
    assert nest.flatten(None) == [None]
    assert nest.flatten("abc") == ["abc"]
    assert nest.flatten(arr)[0] is arr
    assert nest.flatten([1, (2, Point(3, [4])), {"k": 5}]) == [1, 2, 3, 4, 5]
    assert nest.flatten([]) == []


def test_roundtrip_rebuilds_types():
    s = [1, (2, Point(3, [4])), {"k": 5, "a": (6,)}]
    assert nest.pack_sequence_as(s, nest.flatten(s)) == s
    p = nest.pack_sequence_as(Point(0, 0), [7, 8])
    assert isinstance(p, Point) and p == Point(7, 8)


def test_map_structure_and_errors():
    assert nest.map_structure(lambda a, b: a + b, {"a": 1, "b": (2, 3)}, {"b": (20, 30), "a": 10}) == \
        {"a": 11, "b": (22, 33)}
    with pytest.raises(ValueError):
        nest.map_structure(lambda a, b: a, [1, 2], [1, 2, 3])
    with pytest.raises(TypeError):
        nest.assert_same_structure([1, 2], (1, 2))
    nest.assert_same_structure([1, 2], (1, 2), check_types=False)
    with pytest.raises(ValueError):
        nest.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(ValueError):
        nest.pack_sequence_as([0, 0], [1])
    with pytest.raises(TypeError):
        nest.flatten({1: 0, "a": 0})


def test_flatten_up_to():
    assert nest.flatten_up_to([0, 0], [[1, 2], (3,)]) == [[1, 2], (3,)]
    assert nest.flatten_up_to({"b": 0, "a": 0}, {"a": [1], "b": 2}) == [[1], 2]


def test_tensors_and_variables_are_leaves():
    v = tf.Variable([1.0, 2.0])
    t = tf.constant([3.0])
    flat = nest.flatten({"v": v, "t": [t]})
    assert flat[0] is t and flat[1] is v
    assert tf.nest.flatten is nest.flatten


def test_flatten_dict_items():
    assert nest.flatten_dict_items({(4, 5, (6, 8)): ("a", "b", ("c", "d")), 9: "e"}) == \
        {4: "a", 5: "b", 6: "c", 8: "d", 9: "e"}
    with pytest.raises(ValueError):
        nest.flatten_dict_items({(1, 2): ("a",)})
    with pytest.raises(ValueError):
        nest.flatten_dict_items({(1, 2): ("a", "b"), 1: "c"})
    with pytest.raises(TypeError):
        nest.flatten_dict_items([(1, "a")])
