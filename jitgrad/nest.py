"""``tf.nest``: nested structures of lists, tuples, namedtuples and dicts.

One set of rules for every place that flattens a user's structure (Session fetches and feeds,
``jitgrad.function`` signatures and calls, the tape's sources and targets, ``while_loop``
loop variables), so that two of them can never disagree on an order. The rules are TF's:

- lists, tuples, namedtuples and mappings are structure; everything else is a leaf
  (tensors, variables, numpy arrays, strings, ``None``, attrs-like classes);
- a mapping is visited in sorted key order, and rebuilt with its own type and its own key
  order (``pack_sequence_as({'b': 0, 'a': 0}, [1, 2])`` is ``{'b': 2, 'a': 1}``).
"""
import collections
import collections.abc as _abc

__all__ = ["flatten", "pack_sequence_as", "map_structure", "assert_same_structure", "is_nested",
           "is_sequence", "flatten_up_to", "flatten_dict_items"]


def is_nested(x):
    """True for the containers nest descends into."""
    if hasattr(x, "_jitgrad_to_tensor"):
        return False
    return isinstance(x, (list, tuple, _abc.Mapping))


is_sequence = is_nested


def _sorted_keys(mapping):
    try:
        return sorted(mapping)
    except TypeError:
        raise TypeError("nest only supports dicts with sortable keys.") from None


def _children(x):
    if isinstance(x, _abc.Mapping):
        return [x[k] for k in _sorted_keys(x)]
    return list(x)


def _rebuild(instance, children):
    """A container like ``instance`` holding ``children`` (in nest's order)."""
    if isinstance(instance, _abc.Mapping):
        by_key = dict(zip(_sorted_keys(instance), children))
        if isinstance(instance, collections.defaultdict):
            out = type(instance)(instance.default_factory)
            for k in instance:
                out[k] = by_key[k]
            return out
        return type(instance)((k, by_key[k]) for k in instance)
    if isinstance(instance, tuple) and hasattr(instance, "_fields"):
        return type(instance)(*children)
    if isinstance(instance, tuple):
        return tuple(children) if type(instance) is tuple else type(instance)(children)
    return list(children) if type(instance) is list else type(instance)(children)


def flatten(structure, expand_composites=False):
    """The leaves of ``structure`` in nest's order; a leaf alone gives ``[leaf]``."""
    out = []
    stack = [structure]
    while stack:
        x = stack.pop()
        if is_nested(x):
            stack.extend(reversed(_children(x)))
        else:
            out.append(x)
    return out


def _count_leaves(structure):
    return len(flatten(structure))


def pack_sequence_as(structure, flat_sequence, expand_composites=False):
    """``structure`` with its leaves replaced, in order, by ``flat_sequence``."""
    flat = list(flat_sequence) if is_nested(flat_sequence) else None
    if flat is None:
        raise TypeError(f"Attempted to pack value:\n  {flat_sequence!r}\ninto a structure, but found "
                        f"incompatible type `{type(flat_sequence).__name__}` instead.")
    if not is_nested(structure):
        if len(flat) != 1:
            raise ValueError(f"The target structure is of type `{type(structure).__name__}`\n  {structure!r}\n"
                             f"However the input is a sequence ({type(flat_sequence).__name__}) of length "
                             f"{len(flat)}.\n  {flat_sequence!r}\nnest cannot guarantee that it is safe to "
                             "map one to the other.")
        return flat[0]
    n = _count_leaves(structure)
    if n != len(flat):
        raise ValueError(f"Could not pack sequence. Structure had {n} atoms, but flat_sequence had "
                         f"{len(flat)} items.  Structure: {structure!r}, flat_sequence: {flat!r}.")
    it = iter(flat)

    def build(x):
        if not is_nested(x):
            return next(it)
        return _rebuild(x, [build(c) for c in _children(x)])
    return build(structure)


def _same_type(a, b):
    if isinstance(a, _abc.Mapping) and isinstance(b, _abc.Mapping):
        return True          # TF treats all mappings alike here
    return type(a) is type(b)


def assert_same_structure(nest1, nest2, check_types=True, expand_composites=False):
    """Raises ``ValueError`` (shape of the nesting) or ``TypeError`` (container types) on a mismatch."""
    def fail(detail):
        raise ValueError(f"The two structures don't have the same nested structure.\n\nFirst structure: "
                         f"{nest1!r}\n\nSecond structure: {nest2!r}\n\nMore specifically: {detail}")

    def walk(a, b):
        na, nb = is_nested(a), is_nested(b)
        if na != nb:
            fail(f"Substructure \"{a!r}\" is a sequence, while substructure \"{b!r}\" is not"
                 if na else f"Substructure \"{b!r}\" is a sequence, while substructure \"{a!r}\" is not")
        if not na:
            return
        if check_types and not _same_type(a, b):
            raise TypeError(f"The two structures don't have the same sequence type. Input structure has type "
                            f"{type(a)!r}, while shallow structure has type {type(b)!r}.")
        if isinstance(a, _abc.Mapping) and isinstance(b, _abc.Mapping) and set(a) != set(b):
            raise ValueError(f"The two dictionaries don't have the same set of keys. First structure has keys "
                             f"{sorted(a, key=repr)}, while second structure has keys {sorted(b, key=repr)}.")
        ca, cb = _children(a), _children(b)
        if len(ca) != len(cb):
            fail(f"The two namedtuples don't have the same sequence type or length: {len(ca)} vs {len(cb)}"
                 if hasattr(a, "_fields") else f"Argument lengths differ: {len(ca)} vs {len(cb)}")
        for x, y in zip(ca, cb):
            walk(x, y)
    walk(nest1, nest2)


def map_structure(func, *structure, check_types=True, expand_composites=False):
    """``func`` applied leaf by leaf to structures of one shape; the result has the first's shape."""
    if not callable(func):
        raise TypeError(f"func must be callable, got: {func}")
    if not structure:
        raise ValueError("Must provide at least one structure")
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types=check_types)
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])


def flatten_up_to(shallow_tree, input_tree, check_types=True, expand_composites=False):
    """``input_tree`` flattened only as deep as ``shallow_tree`` goes."""
    out = []

    def walk(s, x):
        if not is_nested(s):
            out.append(x)
            return
        if not is_nested(x):
            raise TypeError(f"If shallow structure is a sequence, input must also be a sequence. "
                            f"Input has type: {type(x).__name__}.")
        if check_types and not _same_type(s, x):
            raise TypeError(f"The two structures don't have the same sequence type. Input structure has type "
                            f"{type(x)!r}, while shallow structure has type {type(s)!r}.")
        cs, cx = _children(s), _children(x)
        if isinstance(s, _abc.Mapping):
            missing = set(s) - set(x)
            if missing:
                raise ValueError(f"The input_tree has fewer elements than the shallow_tree. Missing keys: "
                                 f"{sorted(missing, key=repr)}")
            cx = [x[k] for k in _sorted_keys(s)]
        elif len(cs) != len(cx):
            raise ValueError(f"The two structures don't have the same sequence length. Input structure has "
                             f"length {len(cx)}, while shallow structure has length {len(cs)}.")
        for a, b in zip(cs, cx):
            walk(a, b)
    walk(shallow_tree, input_tree)
    return out



def flatten_dict_items(dictionary):
    """``{(a, (b, c)): (1, (2, 3)), d: 4}`` -> ``{a: 1, b: 2, c: 3, d: 4}``: nested keys paired
    with the leaves of their values (TF's Session feeds a nested tuple of tensors this way)."""
    if not isinstance(dictionary, _abc.Mapping):
        raise TypeError("input must be a dictionary")
    flat = {}
    for key, value in dictionary.items():
        if is_nested(key):
            assert_same_structure(key, value, check_types=False)
            pairs = zip(flatten(key), flatten(value))
        else:
            pairs = [(key, value)]
        for k, v in pairs:
            if k in flat:
                raise ValueError(f"Could not flatten dictionary: key {k!r} is not unique.")
            flat[k] = v
    return flat
