"""jitgrad: TensorFlow's autodiff API on a graph compiler (llvmlite).

    import jitgrad as tf
"""
import functools as _functools
import importlib as _importlib
import sys as _sys
import types as _types
from .convert import is_tensorlike
# Registers every op (each op module registers its own when imported).
from .ops import math_ops, reduction_ops, array_ops, linalg_ops, nn_ops, state_ops, bitwise_ops  # noqa: F401

__version__ = "0.1.0"

from . import dtypes, errors, nest  # noqa: E402
from .dtypes import DType, as_dtype, float32, float64, int32, int64, bool_  # noqa: E402
from .dtypes import bool_ as bool  # noqa: E402,A001
from .context import executing_eagerly, init_scope  # noqa: E402
from .graph import Graph, Operation, Tensor, get_default_graph  # noqa: E402
from .shapes import TensorShape  # noqa: E402
from .eager import EagerTensor  # noqa: E402
from .ops import array_ops as _a, math_ops as _m, reduction_ops as _r, linalg_ops as _l, nn_ops as _n  # noqa: E402
from .ops import overloads as _overloads  # noqa: E402
from .convert import convert_to_tensor  # noqa: E402
from .gradients import AggregationMethod, UnconnectedGradients, gradients_v2 as gradients, gradients_v1 as _gradients_v1  # noqa: E402
from .hessians import hessians, hessians_v1 as _hessians_v1  # noqa: E402
from .session import ConfigProto, InteractiveSession, Session, set_default_mode, get_default_mode  # noqa: E402
from .variables import Variable  # noqa: E402
from . import variables as _v, context as _ctx, session as _s, dispatch as _dispatch  # noqa: E402


# The compiler (and, through it, llvmlite) is imported on the first compiled
# Session.run, not by `import jitgrad`.
def _execute(session, elements, fed):
    from . import compiler, fast_runner
    _dispatch.make_runner = fast_runner.runner_for
    _dispatch.compiled_execute = compiler.execute
    return compiler.execute(session, elements, fed)


def cache_info():
    """Compiled-kernel cache counters (see jitgrad.compiler.cache_info)."""
    from .compiler import cache_info as info
    return info()


def clear_cache():
    """Drops every compiled kernel and resets the counters (jitgrad.compiler.clear_cache)."""
    from .compiler import clear_cache as clear
    return clear()


_dispatch.compiled_execute = _execute
_overloads.install(Tensor)
_overloads.install(EagerTensor)

# ---- top-level functions (tf.*)
from .ops.math_ops import (add, subtract, multiply, divide, truediv, realdiv, floordiv, floormod, pow,  # noqa: E402,F401,A004
                           negative, abs, sign, square, sqrt, rsqrt, exp, log, sin, cos, tan, tanh, sigmoid,
                           maximum, minimum, where, equal, not_equal, less, less_equal, greater, greater_equal,
                           logical_and, logical_or, logical_not, cast, add_n, identity, stop_gradient,
                           clip_by_value, zeros_like, ones_like, reciprocal, squared_difference)
from .ops.reduction_ops import reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod  # noqa: E402,F401
from .ops.array_ops import (constant, reshape, transpose, expand_dims, squeeze, concat, stack, unstack,  # noqa: E402,F401
                            gather, tile, broadcast_to, zeros, ones, fill, shape, size, rank, one_hot,
                            get_static_value)
from .ops.linalg_ops import matmul  # noqa: E402,F401

newaxis = None


def _module(name, **members):
    m = _types.ModuleType(f"jitgrad.{name}")
    m.__dict__.update(members)
    return m


math = _module(
    "math", add=add, subtract=subtract, multiply=multiply, divide=divide, truediv=truediv, floordiv=floordiv,
    floormod=floormod, mod=floormod, pow=pow, negative=negative, abs=abs, sign=sign, square=square, sqrt=sqrt,
    rsqrt=rsqrt, exp=exp, expm1=_m.expm1, log=log, log1p=_m.log1p, sin=sin, cos=cos, tan=tan, tanh=tanh,
    sigmoid=sigmoid, maximum=maximum, minimum=minimum, equal=equal, not_equal=not_equal, less=less,
    less_equal=less_equal, greater=greater, greater_equal=greater_equal, logical_and=logical_and,
    logical_or=logical_or, logical_not=logical_not, logical_xor=_m.logical_xor, reduce_sum=reduce_sum,
    reduce_mean=reduce_mean, reduce_max=reduce_max, reduce_min=reduce_min, reduce_prod=reduce_prod,
    add_n=add_n, reciprocal=reciprocal, softplus=_m.softplus, squared_difference=squared_difference,
    multiply_no_nan=_m.multiply_no_nan, where=where, cast=cast)
nn = _module(
    "nn", relu=_m.relu, relu6=_m.relu6, leaky_relu=_m.leaky_relu, elu=_m.elu, softplus=_m.softplus,
    sigmoid=sigmoid, tanh=tanh, softmax=_n.softmax, log_softmax=_n.log_softmax,
    softmax_cross_entropy_with_logits=_n.softmax_cross_entropy_with_logits,
    sparse_softmax_cross_entropy_with_logits=_n.sparse_softmax_cross_entropy_with_logits)
linalg = _module("linalg", matmul=matmul,
                 matvec=lambda a, b, transpose_a=False, adjoint_a=False, a_is_sparse=False, b_is_sparse=False,
                 name=None: squeeze(matmul(a, expand_dims(b, -1), transpose_a=transpose_a, adjoint_a=adjoint_a),
                                    [-1], name=name))
math.reduce_logsumexp = reduce_logsumexp = _n.reduce_logsumexp
math.log_sigmoid = _n.log_sigmoid
for _name in ("sigmoid_cross_entropy_with_logits", "bias_add", "log_sigmoid", "silu"):
    setattr(nn, _name, getattr(_n, _name))
nn.l2_loss = _r.l2_loss
nn.swish = _n.silu
v1 = _module(
    "compat.v1", placeholder=_a.placeholder, placeholder_with_default=_a.placeholder_with_default,
    Session=Session, InteractiveSession=InteractiveSession, ConfigProto=ConfigProto,
    get_default_graph=get_default_graph, reset_default_graph=_ctx.reset_global_default_graph,
    get_default_session=_s.get_default_session, global_variables_initializer=_v.global_variables_initializer,
    initialize_all_variables=_v.global_variables_initializer, variables_initializer=_v.variables_initializer,
    global_variables=_v.global_variables, trainable_variables=_v.trainable_variables,
    disable_eager_execution=_ctx.disable_eager_execution, enable_eager_execution=_ctx.enable_eager_execution,
    executing_eagerly=executing_eagerly, gradients=_gradients_v1, hessians=_hessians_v1, Variable=Variable,
    AggregationMethod=AggregationMethod, constant=constant, Graph=Graph)
compat = _module("compat", v1=v1)
softmax = _n.softmax
expm1, log1p = _m.expm1, _m.log1p
control_dependencies = _ctx.control_dependencies


name_scope = _ctx.name_scope


group, no_op = _v.group, _v.no_op


def _session_for(fetches, session):
    sess = session or _s.get_default_session()
    return sess if sess is not None else Session(graph=nest.flatten(fetches)[0].graph)


def explain(fetches, feed_dict=None, session=None):
    """``jitgrad.explain``: how the default (or given) Session compiles a run."""
    return _session_for(fetches, session).explain(fetches, feed_dict)


def explain_recompile(fetches, feed_dict=None, session=None):
    """Why ``run(fetches, feed_dict)`` would compile: whether its kernel is in memory or on
    disk and, if neither, which cache-key components differ from the closest kernel this
    process has used (``JITGRAD_LOG_RECOMPILES=1`` logs the same on every compile)."""
    from . import kernel_explain
    sess = _session_for(fetches, session)
    plan = sess._fetch_plan(fetches)
    return kernel_explain.explain_recompile(sess, plan.elements, sess._fed_list(feed_dict))

# ---- eager mode: tf.GradientTape, tf.function, eager tf.Variable
from .tape import GradientTape  # noqa: E402
from .function import function, TensorSpec  # noqa: E402
from . import eager_variable as _eager_variable  # noqa: E402,F401


# ---- hyperbolic functions and their inverses (tf.sinh ... tf.atanh and tf.math.*, as TF 2.x)
from .ops.math_ops import sinh, cosh, asinh, acosh, atanh  # noqa: E402,F401
for _name in ("sinh", "cosh", "asinh", "acosh", "atanh"):
    setattr(math, _name, globals()[_name])

# ---- inverse trigonometric functions (tf.asin, tf.acos, tf.atan, tf.atan2 and tf.math.*, as TF 2.x)
from .ops.math_ops import asin, acos, atan, atan2  # noqa: E402,F401
for _name in ("asin", "acos", "atan", "atan2"):
    setattr(math, _name, globals()[_name])


# ---- argmax/argmin, rounding, float classification, any/all, cumsum, range, split
from .ops.math_ops import floor, ceil, round, is_nan, is_inf, is_finite  # noqa: E402,F401,A004
from .ops.reduction_ops import argmax, argmin, reduce_any, reduce_all, cumsum  # noqa: E402,F401
from .ops.array_ops import split, range_ as range  # noqa: E402,F401,A004
for _name in ("argmax", "argmin", "floor", "ceil", "round", "is_nan", "is_inf", "is_finite", "reduce_any",
              "reduce_all", "cumsum"):
    setattr(math, _name, globals()[_name])


# ---- composites: norm, variance/std, l2_normalize, pad, reverse, eye, linspace
from .ops.linalg_ops import norm, eye  # noqa: E402,F401
from .ops.array_ops import pad, reverse, linspace  # noqa: E402,F401
math.reduce_variance, math.reduce_std = _r.reduce_variance, _r.reduce_std
math.l2_normalize = nn.l2_normalize = linalg.l2_normalize = _n.l2_normalize
linalg.norm, linalg.eye = norm, eye
v1.lin_space = linspace   # TF 1's name (tf.compat.v1.lin_space)


# ---- training composites: clipping, dropout, moments / batch norm, embedding lookup, tensordot, ...
from .ops import clip_ops as _clip  # noqa: E402
from .ops.clip_ops import clip_by_norm, clip_by_global_norm  # noqa: E402,F401
from .ops.linalg_ops import tensordot  # noqa: E402,F401
linalg.global_norm, linalg.tensordot = _clip.global_norm, tensordot
from .ops.einsum import einsum  # noqa: E402,F401
from .ops.gather_nd import gather_nd  # noqa: E402,F401
from .ops import pooling as _pool  # noqa: E402
nn.max_pool2d, nn.avg_pool2d, nn.max_pool, nn.avg_pool = _pool.max_pool2d, _pool.avg_pool2d, _pool.max_pool, _pool.avg_pool
nn.max_pool1d, nn.avg_pool1d = _pool.max_pool1d, _pool.avg_pool1d
from .ops.gather_batched import gather  # noqa: E402,F401,F811  (array_ops.gather, and batch_dims)
from .ops import conv as _conv  # noqa: E402
from .ops.unique import unique, unique_with_counts  # noqa: E402,F401
from .ops.bincount import bincount as _bincount  # noqa: E402
math.bincount = v1.bincount = _bincount   # (TF 2.21: tf.math.bincount and tf.compat.v1.bincount, no tf.bincount)
nn.conv2d, nn.conv1d = _conv.conv2d, _conv.conv1d
nn.depthwise_conv2d, nn.separable_conv2d = _conv.depthwise_conv2d, _conv.separable_conv2d
nn.conv2d_transpose, nn.conv1d_transpose = _conv.conv2d_transpose, _conv.conv1d_transpose
from .ops.scatter_nd import (scatter_nd, tensor_scatter_nd_add, tensor_scatter_nd_sub,  # noqa: E402,F401
                             tensor_scatter_nd_update)
from .ops import linalg_composites as _lc, math_composites as _mc  # noqa: E402
from .ops.math_composites import roll, saturate_cast  # noqa: E402,F401
linalg.trace, linalg.logdet, linalg.band_part, linalg.cross = _lc.trace, _lc.logdet, _lc.band_part, _lc.cross
math.reciprocal_no_nan, math.in_top_k, math.rint = _mc.reciprocal_no_nan, _mc.in_top_k, _m.round
v1.matrix_band_part, v1.trace = _lc.band_part, _lc.trace
nn.in_top_k = _mc.in_top_k
dtypes.saturate_cast = saturate_cast
linalg.einsum = einsum
v1.global_norm = _clip.global_norm   # TF 1's name (tf.compat.v1.global_norm)
for _name in ("dropout", "moments", "normalize_moments", "batch_normalization", "embedding_lookup", "selu", "softsign", "gelu"):
    setattr(nn, _name, getattr(_n, _name))
math.log_softmax = _n.log_softmax
math.divide_no_nan = _m.divide_no_nan
math.reduce_euclidean_norm = _r.reduce_euclidean_norm
math.softsign = _n.softsign   # TF exports softsign under tf.math too
math.erf = v1.erf = _m.erf     # TF 2 has no top-level tf.erf (TF 1 did)
math.erfc = v1.erfc = _m.erfc  # likewise
from .ops import xlogy_ops as _xlogy  # noqa: E402
from .ops import gamma_ops as _gamma  # noqa: E402
math.lgamma, math.digamma = _gamma.lgamma, _gamma.digamma   # (tf.math only, as TF 2.21)
from .ops import erfinv_ops as _erfinv  # noqa: E402
math.erfinv, math.ndtri = _erfinv.erfinv, _erfinv.ndtri   # (tf.math only, as TF 2.21)
math.xlogy, math.xdivy, math.xlog1py = _xlogy.xlogy, _xlogy.xdivy, _xlogy.xlog1py
from .ops import segment_ops as _segment  # noqa: E402
for _name in _segment.__all__:
    setattr(math, _name, getattr(_segment, _name))
bitwise = _module("bitwise", **{_name: getattr(bitwise_ops, _name) for _name in bitwise_ops.__all__})
v1.bitwise = bitwise
# TF 2.21 has tf.truncatediv / tf.truncatemod at the top level only (no tf.math.truncatediv)
from .ops.math_ops import truncatediv, truncatemod  # noqa: E402,F401
from .ops.sort_ops import sort, argsort  # noqa: E402,F401
from .ops import sort_ops as _sort  # noqa: E402
math.top_k = nn.top_k = _sort.top_k


def is_tensor(x):
    """``tf.is_tensor``: a graph or eager tensor, or a variable (TF counts those);
    Python and numpy values are not."""
    return is_tensorlike(x)


# ---- control flow: tf.cond, tf.while_loop and what is built on them (control_flow.py)
from . import control_flow as _cf  # noqa: E402
from .control_flow import cond, case, switch_case, while_loop  # noqa: E402,F401
from .functional_ops import map_fn, scan, foldl, foldr, vectorized_map  # noqa: E402,F401
from .shape_checks import ensure_shape  # noqa: E402,F401
v1.cond = _cf.cond_v1
v1.while_loop = _cf.while_loop_v1


# ---- optimizers: tf.compat.v1.train, tf.keras.optimizers (= tf.optimizers)
from . import optimizers as _opt  # noqa: E402
from . import train_v1 as _train_v1  # noqa: E402
v1.train = _module("compat.v1.train", Optimizer=_opt.Optimizer, GradientDescentOptimizer=_opt.GradientDescentOptimizer,
                   MomentumOptimizer=_opt.MomentumOptimizer, AdamOptimizer=_opt.AdamOptimizer,
                   **{name: getattr(_train_v1, name) for name in (
                       "RMSPropOptimizer", "AdagradOptimizer", "AdadeltaOptimizer", "get_global_step",
                       "create_global_step", "get_or_create_global_step", "exponential_decay", "inverse_time_decay",
                       "polynomial_decay", "piecewise_constant", "cosine_decay")})
from . import keras_optimizers as _kopt  # noqa: E402
from .indexed_slices import IndexedSlices, IndexedSlicesValue as _IndexedSlicesValue  # noqa: E402,F401
v1.IndexedSlicesValue = _IndexedSlicesValue
from . import checkpoint as _ckpt  # noqa: E402
train = _module("train", Checkpoint=_ckpt.Checkpoint, CheckpointManager=_ckpt.CheckpointManager,
                latest_checkpoint=_ckpt.latest_checkpoint)
v1.train.__dict__.update(train.__dict__ | {"__name__": v1.train.__name__, "Saver": _ckpt.Saver})
from . import learning_rate_schedules as _lrs  # noqa: E402
optimizers = _module("keras.optimizers", Optimizer=_opt.KerasOptimizer, SGD=_opt.SGD, Adam=_opt.Adam,
                     RMSprop=_kopt.RMSprop, Adagrad=_kopt.Adagrad, Adamax=_kopt.Adamax, Nadam=_kopt.Nadam,
                     AdamW=_kopt.AdamW, Adadelta=_kopt.Adadelta, Ftrl=_kopt.Ftrl, Lion=_kopt.Lion,
                     schedules=_module("keras.optimizers.schedules", **{
                         name: getattr(_lrs, name) for name in (
                             "LearningRateSchedule", "ExponentialDecay", "InverseTimeDecay", "PiecewiseConstantDecay",
                             "PolynomialDecay", "CosineDecay", "CosineDecayRestarts")}))


# ---- tf.random (values from numpy's generator, TF's seeding rules: ops/random_ops.py)
from .ops import random_ops as _rand  # noqa: E402
random = _module("random", uniform=_rand.uniform, normal=_rand.normal, truncated_normal=_rand.truncated_normal,
                 set_seed=_rand.set_seed)
v1.set_random_seed = _rand.set_seed
v1.random_uniform, v1.random_normal, v1.truncated_normal = _rand.uniform, _rand.normal, _rand.truncated_normal
v1.random = _module("compat.v1.random", uniform=_rand.uniform, normal=_rand.normal,
                    truncated_normal=_rand.truncated_normal, set_random_seed=_rand.set_seed)


# ---- issue 17 part A: TF 2 tensor equality switches, tf.Module, custom_gradient, tf.print, Keras core
v1.enable_tensor_equality, v1.disable_tensor_equality = _ctx.enable_tensor_equality, _ctx.disable_tensor_equality
v1.enable_v2_behavior, v1.disable_v2_behavior = _ctx.enable_v2_behavior, _ctx.disable_v2_behavior
v1.executing_eagerly_outside_functions = _ctx.executing_eagerly_outside_functions
from .module import Module  # noqa: E402
from .custom_gradient import custom_gradient  # noqa: E402
from .recompute_grad import recompute_grad  # noqa: E402
from .print_ops import print_v2 as print  # noqa: E402,A001
from .assert_ops import Assert  # noqa: E402


def _v1_cast(x, name=None, dtype=None):
    """tf.compat.v1.to_float and its kin: a cast named as TF 1's ("ToFloat", ...)."""
    return cast(x, dtype, name=name)


def _fill_compat_v1():
    """`import jitgrad.compat.v1 as tf` is the TF1 entry point: it holds the v1
    functions above plus every public top-level name (dtypes, ops, tf.nn, ...)."""
    for key, value in list(globals().items()):
        if not key.startswith("_") and key not in ("compat", "v1") and key not in v1.__dict__:
            setattr(v1, key, value)
    # TF 1 also had most of tf.math and tf.linalg at its top level (tf.segment_sum, tf.lgamma,
    # tf.matrix_set_diag, ...)
    for module in (math, linalg):
        for key, value in module.__dict__.items():
            if not key.startswith("_") and key not in v1.__dict__:
                setattr(v1, key, value)
    # tf.compat.v1.nn: tf.nn with TF 1's dropout (keep_prob)
    v1.nn = _module("compat.v1.nn", **{k: v for k, v in nn.__dict__.items() if not k.startswith("__")})
    v1.nn.dropout = _n.dropout_v1
    v1.nn.softmax_cross_entropy_with_logits = _n.softmax_cross_entropy_with_logits_v1
    v1.nn.softmax_cross_entropy_with_logits_v2 = _n.softmax_cross_entropy_with_logits_v2_v1
    v1.nn.max_pool, v1.nn.avg_pool = _pool.max_pool_v1, _pool.avg_pool_v1   # (value, ..., input=None)
    # TF 1's spellings of TF 2 functions
    for dtype_name, dtype in (("float", "float32"), ("double", "float64"), ("int32", "int32"), ("int64", "int64"),
                              ("bfloat16", "bfloat16"), ("complex64", "complex64"), ("complex128", "complex128")):
        setattr(v1, "to_" + dtype_name, _functools.partial(_v1_cast, dtype=getattr(dtypes, dtype)))
    v1.reverse_v2, v1.where_v2, v1.floor_div = reverse, where, floordiv   # (arg_max & co: compat_v1.py)
    v1.assign = lambda ref, value, validate_shape=None, use_locking=None, name=None: ref.assign(value, name=name)
    v1.assign_add = lambda ref, value, use_locking=None, name=None: ref.assign_add(value, name=name)
    v1.assign_sub = lambda ref, value, use_locking=None, name=None: ref.assign_sub(value, name=name)
    v1.Session = Session  # the v1 names win over anything of the same name above
    _sys.modules[__name__ + ".compat"] = compat
    _sys.modules[__name__ + ".compat.v1"] = v1


_fill_compat_v1()



# ---- issue 17b: conversion rules, runtime utilities, introspection, more ops (one block, for merges)
from . import config as _config  # noqa: E402
from .ops import host_ops as _host, mask_ops as _mask, py_func_ops as _pyf  # noqa: E402
from .tensor_array import TensorArray  # noqa: E402,F401
from .function import ConcreteFunction as _ConcreteFunction, Function as _Function  # noqa: E402
import builtins as _builtins, typing as _typing  # noqa: E402
import numpy as _np  # noqa: E402
config = _config._modules(_module)
device = _config.device
timestamp = _host.timestamp
broadcast_static_shape, broadcast_dynamic_shape = _config.broadcast_static_shape, _config.broadcast_dynamic_shape
linalg.inv, linalg.det, linalg.slogdet = _l.matrix_inverse, _l.matrix_determinant, _l.log_matrix_determinant
linalg.matrix_transpose = _a.matrix_transpose
linalg.adjoint = lambda matrix, name=None: _a.matrix_transpose(matrix, name=name or "adjoint", conjugate=True)
linalg.solve, linalg.cholesky, linalg.diag, linalg.diag_part = _l.matrix_solve, _l.cholesky, _l.diag, _l.diag_part
linalg.triangular_solve = _l.matrix_triangular_solve
v1.matrix_inverse, v1.matrix_determinant, v1.matrix_solve, v1.cholesky = (
    _l.matrix_inverse, _l.matrix_determinant, _l.matrix_solve, _l.cholesky)
v1.diag, v1.diag_part, v1.py_func = _l.diag, _l.diag_part, _pyf.numpy_function
boolean_mask = _mask.boolean_mask
slice = _a.slice_  # noqa: A001
py_function, numpy_function = _pyf.py_function, _pyf.numpy_function
math.cumprod = cumprod = _r.cumprod
math.cumulative_logsumexp = _r.cumulative_logsumexp   # (tf.math only, as TF 2.21)
from .ops import complex_ops as _cx  # noqa: E402
from .dtypes import (float16, half, bfloat16, int8, int16, uint8, uint16, uint32, uint64,  # noqa: E402,F401
                     complex64, complex128)
double = float64
complex = _cx.complex  # noqa: A001
math.real, math.imag, math.conj, math.complex, math.angle = _cx.real, _cx.imag, _cx.conj, _cx.complex, _cx.angle
real, imag, conj = _cx.real, _cx.imag, _cx.conj
from .ops import string_ops as _str  # noqa: E402
from .dtypes import string  # noqa: E402,F401
strings = _module("strings", join=_str.join, length=_str.length, upper=_str.upper, lower=_str.lower,
                  format=_str.format, as_string=_str.as_string, to_number=_str.to_number,
                  reduce_join=_str.reduce_join, strip=_str.strip, substr=_str.substr,
                  regex_replace=_str.regex_replace, regex_full_match=_str.regex_full_match, split=_str.split,
                  bytes_split=_str.bytes_split)
as_string = _str.as_string
from . import data as _data  # noqa: E402
data = _data._module(_module)
types = _module("types", experimental=_module(
    "types.experimental", ConcreteFunction=_ConcreteFunction, GenericFunction=_Function,
    PolymorphicFunction=_Function,
    TensorLike=_typing.Union[Tensor, EagerTensor, Variable, _np.ndarray, int, float, _builtins.bool, list, tuple]))
# ---- issue 17c: tf.debugging and the tf.assert_* names (debugging.py)
from . import debugging as _dbg  # noqa: E402
debugging, v1.debugging, _dbg_top, _dbg_top_v1 = _dbg.modules(_module)
globals().update(_dbg_top)
v1.__dict__.update(_dbg_top_v1)
_fill_compat_v1()


# Sub-packages imported when first used, not by `import jitgrad` (each costs tens of ms, Dask
# far more; a warm start is mostly import time): tf.keras, tf.autograph, tf.distribute.
_LAZY = ("keras", "autograph", "distribute")


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'jitgrad' has no attribute {name!r}")
    module = _importlib.import_module("." + name, __name__)
    globals()[name] = module
    return module


# tf.compat.v1's variable scopes and initializers (variable_scope.py, on Keras's initializers):
# loaded when a TF 1 program first asks for one.
_V1_VARIABLE_SCOPE = ("variable_scope", "get_variable", "get_variable_scope", "VariableScope", "AUTO_REUSE",
                      "zeros_initializer", "ones_initializer", "constant_initializer", "random_normal_initializer",
                      "truncated_normal_initializer", "random_uniform_initializer", "variance_scaling_initializer",
                      "glorot_uniform_initializer", "glorot_normal_initializer")


def _v1_getattr(name):
    if name in _LAZY:
        return __getattr__(name)
    if name in _V1_VARIABLE_SCOPE:
        scopes = _importlib.import_module(".variable_scope", __name__)
        for key in _V1_VARIABLE_SCOPE:
            setattr(v1, key, getattr(scopes, key))
        return getattr(scopes, name)
    raise AttributeError(f"module 'jitgrad.compat.v1' has no attribute {name!r}")


v1.__getattr__ = _v1_getattr


# ---- array composites (ops/array_composites.py): repeat, meshgrid, sequence_mask, searchsorted, ...
from .ops.array_composites import (identity_n, meshgrid, repeat, reverse_sequence, searchsorted,  # noqa: E402,F401
                                   sequence_mask, shape_n, strided_slice, unravel_index)
v1.__dict__.update(identity_n=identity_n, meshgrid=meshgrid, repeat=repeat, reverse_sequence=reverse_sequence,
                   searchsorted=searchsorted, sequence_mask=sequence_mask, shape_n=shape_n,
                   strided_slice=strided_slice, unravel_index=unravel_index, vectorized_map=vectorized_map,
                   ensure_shape=ensure_shape)


# ---- counting / checking composites (ops/counting_ops.py) and more math composites
from .ops import counting_ops as _count  # noqa: E402
from .ops.math_composites import scalar_mul  # noqa: E402,F401
for _name in ("count_nonzero", "zero_fraction", "is_non_decreasing", "is_strictly_increasing",
              "invert_permutation", "confusion_matrix"):
    setattr(math, _name, getattr(_count, _name))
math.scalar_mul, math.polyval, math.accumulate_n = scalar_mul, _mc.polyval, _mc.accumulate_n
math.softmax = _n.softmax   # TF 2 exports softmax under tf.math too (log_softmax is above)
v1.__dict__.update(count_nonzero=_count.count_nonzero_v1, invert_permutation=_count.invert_permutation,
                   confusion_matrix=_count.confusion_matrix, scalar_mul=scalar_mul,
                   accumulate_n=_mc.accumulate_n, is_non_decreasing=_count.is_non_decreasing,
                   is_strictly_increasing=_count.is_strictly_increasing)
from .ops.scatter_nd_extremes import tensor_scatter_nd_max, tensor_scatter_nd_min  # noqa: E402,F401
v1.tensor_scatter_nd_max, v1.tensor_scatter_nd_min = tensor_scatter_nd_max, tensor_scatter_nd_min


# ---- tf.nn composites (ops/nn_composites.py)
from .ops import nn_composites as _nc  # noqa: E402
for _name in ("weighted_cross_entropy_with_logits", "sufficient_statistics", "weighted_moments",
              "compute_average_loss", "scale_regularization_loss", "log_poisson_loss", "crelu", "space_to_depth",
              "depth_to_space", "local_response_normalization"):
    setattr(nn, _name, getattr(_nc, _name))
nn.lrn = _nc.local_response_normalization
v1.nn.__dict__.update({k: getattr(nn, k) for k in ("weighted_cross_entropy_with_logits", "weighted_moments",
                                                  "log_poisson_loss", "crelu", "space_to_depth", "depth_to_space",
                                                  "local_response_normalization", "lrn")})
v1.nn.sufficient_statistics = _nc.sufficient_statistics_v1
v1.space_to_depth, v1.depth_to_space = _nc.space_to_depth, _nc.depth_to_space


# ---- tf.random.categorical / shuffle (ops/random_composites.py)
from .ops import random_composites as _rc  # noqa: E402
random.categorical, random.shuffle = _rc.categorical, _rc.shuffle
v1.random.categorical, v1.random.shuffle, v1.random_shuffle = _rc.categorical, _rc.shuffle, _rc.shuffle

# ---- tf.random.stateless_* and split / fold_in: TF's Philox values (ops/stateless_random_ops.py)
from .ops import stateless_random_ops as _srand  # noqa: E402
random.stateless_uniform, random.stateless_normal = _srand.stateless_uniform, _srand.stateless_normal
random.stateless_truncated_normal = _srand.stateless_truncated_normal
random.split, random.fold_in = _srand.split, _srand.fold_in
random.stateless_categorical = _srand.stateless_categorical
v1.random.stateless_multinomial = lambda logits, num_samples, seed, output_dtype=None, name=None: \
    _srand.stateless_categorical(logits, num_samples, seed, output_dtype, name)
from .ops import random_gamma_poisson as _rgp  # noqa: E402
random.gamma, random.poisson = _rgp.gamma, _rgp.poisson
random.stateless_gamma, random.stateless_poisson = _rgp.stateless_gamma, _rgp.stateless_poisson
random.stateless_binomial = _rgp.stateless_binomial
v1.random.gamma, v1.random_gamma, v1.random.poisson, v1.random_poisson = _rgp.gamma, _rgp.gamma, _rgp.poisson_v1, \
    _rgp.poisson_v1
from .ops import random_generator as _rgen  # noqa: E402
random.Generator, random.Algorithm, random.create_rng_state = _rgen.Generator, _rgen.Algorithm, _rgen.create_rng_state
random.get_global_generator, random.set_global_generator = _rgen.get_global_generator, _rgen.set_global_generator
random.experimental = _module("random.experimental", stateless_split=_srand.split, stateless_fold_in=_srand.fold_in,
                              Generator=_rgen.Generator, Algorithm=_rgen.Algorithm,
                              create_rng_state=_rgen.create_rng_state, get_global_generator=_rgen.get_global_generator,
                              set_global_generator=_rgen.set_global_generator)


# ---- more tf.linalg composites (ops/linalg_composites.py)
linalg.normalize, linalg.cholesky_solve, linalg.set_diag = _lc.normalize, _lc.cholesky_solve, _lc.set_diag
linalg.tensor_diag, linalg.tensor_diag_part = _lc.tensor_diag, _lc.tensor_diag_part
v1.matrix_set_diag, v1.cholesky_solve = _lc.set_diag, _lc.cholesky_solve
v1.multinomial = lambda logits, num_samples, seed=None, name=None, output_dtype=None: _rc.categorical(
    logits, num_samples, dtype=output_dtype, seed=seed, name=name)   # TF 1's name for categorical


# ---- tf.linalg decompositions: qr, eigh, svd and TF's composites of them (ops/linalg_decompositions.py)
from .ops import linalg_decompositions as _ld  # noqa: E402
linalg.qr, linalg.svd, linalg.eigh, linalg.eigvalsh = _ld.qr, _ld.svd, _ld.self_adjoint_eig, _ld.self_adjoint_eigvals
linalg.pinv, linalg.lstsq, linalg.matrix_rank = _ld.pinv, _ld.lstsq, _ld.matrix_rank
v1.qr, v1.svd, v1.self_adjoint_eig, v1.self_adjoint_eigvals = _ld.qr, _ld.svd, _ld.self_adjoint_eig, _ld.self_adjoint_eigvals
v1.matrix_solve_ls = _ld.lstsq


# ---- TF 1's versions of TF 2 functions (compat_v1.py): old argument spellings and orders, TF 1's
# where (a vector condition picks rows) and div; tf.compat.v1.math / .linalg of their own
from . import compat_v1 as _compat_v1  # noqa: E402
v1.__dict__.update(_compat_v1.TOP)
v1.math = _module("compat.v1.math", **{**{k: val for k, val in math.__dict__.items() if not k.startswith("__")},
                                      **_compat_v1.MATH})
v1.linalg = _module("compat.v1.linalg", **{**{k: val for k, val in linalg.__dict__.items() if not k.startswith("__")},
                                          **_compat_v1.LINALG})
v1.nn.__dict__.update(_compat_v1.NN)
v1.strings = _module("compat.v1.strings", **{**{k: val for k, val in strings.__dict__.items() if not k.startswith("__")},
                                            **_compat_v1.STRINGS})


# ---- tf.compat.v1.losses: TF 1's loss functions and the loss collections (losses_v1.py)
from . import losses_v1 as _losses_v1  # noqa: E402
v1.losses = _module("compat.v1.losses", **{name: getattr(_losses_v1, name) for name in _losses_v1.__all__})


# ---- tf.image (ops/image_ops.py)
from .ops import image_ops as _image, image_resize as _image_resize  # noqa: E402
image = _module("image", **{_name: getattr(_m, _name) for _m in (_image, _image_resize) for _name in _m.__all__})


# ---- tf.signal: Fourier transforms (ops/fft_ops.py); tf.compat.v1.spectral has the transforms
from .ops import fft_ops as _fft  # noqa: E402
signal = _module("signal", **{_name: getattr(_fft, _name) for _name in _fft.__all__})
v1.signal = signal
v1.spectral = _module("compat.v1.spectral", **{_name: getattr(_fft, _name) for _name in _fft.__all__
                                               if "shift" not in _name})
from .ops import signal_composites as _signal_composites  # noqa: E402
signal.__dict__.update({_name: getattr(_signal_composites, _name) for _name in _signal_composites.__all__})

# ---- tf.SparseTensor and tf.sparse (sparse_tensor.py, sparse_ops.py), the sparse embedding
# lookups (sparse_embedding.py)
from .sparse_tensor import SparseTensor, SparseTensorValue as _SparseTensorValue  # noqa: E402,F401
from .sparse_tensor import sparse_placeholder as _sparse_placeholder  # noqa: E402
from . import sparse_ops as _sp, sparse_embedding as _spe  # noqa: E402
sparse = _module("sparse", SparseTensor=SparseTensor, reshape=_sp.reshape_sparse, slice=_sp.slice_sparse,
                 concat=_sp.concat_sparse, split=_sp.split_sparse, **{_name: getattr(_sp, _name) for _name in _sp.__all__})
nn.embedding_lookup_sparse, nn.safe_embedding_lookup_sparse = _spe.embedding_lookup_sparse, \
    _spe.safe_embedding_lookup_sparse
sparse.segment_sum, sparse.segment_mean = _spe.sparse_segment_sum, _spe.sparse_segment_mean
sparse.segment_sqrt_n = _spe.sparse_segment_sqrt_n
v1.SparseTensor, v1.SparseTensorValue, v1.sparse_placeholder = SparseTensor, _SparseTensorValue, _sparse_placeholder
v1.sparse = sparse
v1.sparse_tensor_dense_matmul, v1.sparse_tensor_to_dense = _sp.sparse_dense_matmul, _sp.to_dense
v1.sparse_reorder, v1.sparse_reshape, v1.sparse_add = _sp.reorder, _sp.reshape_sparse, _sp.add
v1.sparse_reduce_sum_sparse, v1.sparse_reduce_max_sparse = _sp.reduce_sum_sparse, _sp.reduce_max_sparse
v1.nn.embedding_lookup_sparse = lambda params, sp_ids, sp_weights, partition_strategy="mod", name=None, \
    combiner=None, max_norm=None: _spe.embedding_lookup_sparse(params, sp_ids, sp_weights, combiner, max_norm, name)
v1.nn.safe_embedding_lookup_sparse = lambda embedding_weights, sparse_ids, sparse_weights=None, combiner="mean", \
    default_id=None, name=None, partition_strategy="div", max_norm=None: _spe.safe_embedding_lookup_sparse(
        embedding_weights, sparse_ids, sparse_weights, combiner, default_id, max_norm, name)
