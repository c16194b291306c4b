"""Turning a Python function into its converted twin: source -> transformer ->
code compiled once per code object, instantiated with the original function's
globals, closure cells and defaults (as TF's transpiler does), and
``converted_call``, the run-time check of which callees are converted."""
import ast
import functools
import inspect
import itertools
import linecache
import sys
import textwrap
import types
import weakref

from . import asserts, operators
from .transformer import Unconvertible, transform
from ..function import Function

# Library code is called as it is (TF: its allowlist of modules it never converts).
_LIBRARY_PREFIXES = ("jitgrad", "numpy", "tensorflow", "keras", "jax", "torch", "scipy", "pandas", "llvmlite")
_BUILTIN_OVERLOADS = {range: operators.range_, len: operators.len_}

_code_cache = {}                          # code object -> (code of the converted function, source) or exception
_fn_cache = weakref.WeakKeyDictionary()   # function -> converted function
_file_ids = itertools.count()


def do_not_convert(func=None):
    """``tf.autograph.experimental.do_not_convert``: ``func`` runs as written."""
    if func is None:
        return do_not_convert

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    wrapper.__ag_do_not_convert__ = True
    return wrapper


def _is_library(f):
    module = getattr(f, "__module__", None) or ""
    return module.split(".")[0] in _LIBRARY_PREFIXES or module in sys.builtin_module_names or \
        module in getattr(sys, "stdlib_module_names", ()) or module.split(".")[0] in getattr(sys, "stdlib_module_names", ())


def converted_call(f):
    """The callable a converted function calls in place of ``f``: user functions
    and methods converted (recursively, as TF), everything else as it is."""
    overload = _BUILTIN_OVERLOADS.get(f) if isinstance(f, types.BuiltinFunctionType) or f is range else None
    if overload is not None:
        return overload
    if getattr(f, "__ag_do_not_convert__", False):
        return f
    if isinstance(f, Function):
        return f     # traced with its own autograph setting
    if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
        conv = _converted_or_none(f.__func__)
        return f if conv is None else types.MethodType(conv, f.__self__)
    if isinstance(f, types.FunctionType):
        conv = _converted_or_none(f)
        return f if conv is None else conv
    return f


def _converted_or_none(f):
    if getattr(f, "__ag_do_not_convert__", False) or _is_library(f) or f.__code__.co_name == "<lambda>" or \
            hasattr(f, "__wrapped__"):   # a decorator's wrapper: its source is not its code
        return None
    try:
        return convert(f)
    except Unconvertible:
        return None


def convert(f):
    """The converted version of a plain Python function (cached)."""
    conv = _fn_cache.get(f)
    if conv is not None:
        return conv
    code, _ = _converted_code(f)
    freevars = f.__code__.co_freevars
    cells = dict(zip(freevars, f.__closure__ or ()))
    cells["ag__"] = types.CellType(_AG_MODULE)
    closure = tuple(cells[n] for n in code.co_freevars)
    conv = types.FunctionType(code, f.__globals__, f.__name__, f.__defaults__, closure)
    conv.__kwdefaults__ = f.__kwdefaults__
    conv.__dict__.update(f.__dict__)
    conv.__wrapped_by_autograph__ = f
    conv.__qualname__ = f.__qualname__
    conv.__doc__ = f.__doc__
    _fn_cache[f] = conv
    return conv


def to_code_of(f):
    """The converted source text of ``f`` (``tf.autograph.to_code``)."""
    if isinstance(f, types.MethodType):
        f = f.__func__
    f = getattr(f, "python_function", f)
    return _converted_code(f)[1]


def _converted_code(f):
    key = f.__code__
    hit = _code_cache.get(key)
    if hit is None:
        try:
            hit = _compile(f)
        except Unconvertible as e:
            hit = e
        _code_cache[key] = hit
    if isinstance(hit, Exception):
        raise hit
    return hit


def _compile(f):
    try:
        src = textwrap.dedent(inspect.getsource(f))
    except (OSError, TypeError) as e:
        raise Unconvertible(f"no source for {f!r}: {e}") from None
    try:
        tree = ast.parse(src)
    except SyntaxError as e:    # e.g. a lambda's line, not a whole statement
        raise Unconvertible(f"source of {f!r} does not parse alone: {e}") from None
    fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == f.__code__.co_name), None)
    if fdef is None:
        raise Unconvertible(f"{f!r} is not a `def` statement")
    fdef = transform(fdef)
    ast.fix_missing_locations(fdef)
    text = ast.unparse(fdef) + "\n"
    # the factory's locals stand for the original closure's cells (and ag__)
    names = [n for n in f.__code__.co_freevars if n != "ag__"] + ["ag__"]
    factory = "def __ag_factory():\n" + "".join(f"    {n} = None\n" for n in names) + textwrap.indent(text, "    ") \
        + f"    return {fdef.name}\n"
    filename = f"<autograph {f.__qualname__} #{next(_file_ids)}>"
    linecache.cache[filename] = (len(factory), None, factory.splitlines(True), filename)   # inspect.getsource works
    module_code = compile(factory, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in module_code.co_consts if isinstance(c, types.CodeType))
    code = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fdef.name)
    return code, text


class _AgModule(types.SimpleNamespace):
    """What converted code calls ``ag__``."""


_AG_MODULE = _AgModule(
    converted_call=converted_call, if_stmt=operators.if_stmt, while_stmt=operators.while_stmt,
    for_stmt=operators.for_stmt, if_exp=operators.if_exp, and_=operators.and_, or_=operators.or_,
    not_=operators.not_, ld=operators.ld, ldu=operators.ldu, retval=operators.retval,
    Undefined=operators.Undefined, UndefinedReturnValue=operators.UndefinedReturnValue,
    assert_stmt=asserts.assert_stmt)
