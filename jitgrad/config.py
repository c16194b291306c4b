"""``tf.config``, ``tf.device`` and ``tf.broadcast_static_shape`` /
``broadcast_dynamic_shape``: the runtime utilities TF programs touch.

jitgrad runs on the host CPU only: it has one physical and one logical
device, ``CPU:0``. ``tf.device`` accepts every name TF's ``DeviceSpec``
parses; a GPU/TPU name places ops on the CPU, which is what TF 2 does on a
machine without that device (soft device placement, on by default).
"""
import collections
import contextlib

import numpy as np

from . import context, denormals
from .convert import is_tensorlike, to_numpy
from .errors import shape_error
from .ops.array_ops import constant, get_static_value
from .shapes import TensorShape, as_shape, broadcast_dims

PhysicalDevice = collections.namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = collections.namedtuple("LogicalDevice", ["name", "device_type"])

_CPU = PhysicalDevice("/physical_device:CPU:0", "CPU")
_CPU_LOGICAL = LogicalDevice("/device:CPU:0", "CPU")
_VALID_DEVICE_TYPES = frozenset({"CPU", "GPU", "TPU", "CUSTOM", "EPHEMERAL"})


# ---------------------------------------------------------------- devices
def list_physical_devices(device_type=None):
    return [_CPU] if device_type is None or device_type.upper() == "CPU" else []


def list_logical_devices(device_type=None):
    return [_CPU_LOGICAL] if device_type is None or device_type.upper() == "CPU" else []


def get_visible_devices(device_type=None):
    return list_physical_devices(device_type)


def set_visible_devices(devices, device_type=None):
    devices = [devices] if isinstance(devices, PhysicalDevice) else list(devices)
    for d in devices:
        if d not in (_CPU,):
            raise ValueError(f"Unrecognized device: {d!r}")


def set_memory_growth(device, enable):
    raise ValueError("Cannot set memory growth on non-GPU devices"
                     if device == _CPU else f"Unrecognized device: {device!r}")


def get_memory_growth(device):
    raise ValueError(f"Cannot get memory growth on {device!r}: jitgrad has no GPU devices.")


def parse_device(spec):
    """``DeviceSpec.from_string``'s rules: returns (device type or None, index or None);
    ValueError for what TF cannot parse."""
    device_type = index = None
    for part in (spec or "").split("/"):
        y = part.split(":")
        ly = len(y)
        if not part:
            continue
        if ly == 2 and y[0] in ("job", "replica", "task"):
            continue
        if ly in (1, 2) and y[0].upper() in _VALID_DEVICE_TYPES or ly == 3 and y[0] == "device":
            if device_type is not None:
                raise ValueError(f"Multiple device types are not allowed while parsing the device spec: {spec}.")
            device_type = y[0].upper() if ly < 3 else y[1]
            raw = y[-1] if ly > 1 else "*"
            if raw != "*":
                try:
                    index = int(raw)
                except ValueError:
                    raise ValueError(f"invalid literal for device index {raw!r} in the device spec: "
                                     f"'{spec}'.") from None
            continue
        raise ValueError(f"Unknown attribute '{y[0]}' is encountered while parsing the device spec: '{spec}'.")
    return device_type, index


@contextlib.contextmanager
def device(device_name):
    """``tf.device``: checks the name as TF does; everything runs on the CPU."""
    if callable(device_name):
        if context.executing_eagerly():
            raise RuntimeError("tf.device does not support functions when eager execution is enabled.")
        raise NotImplementedError("jitgrad's tf.device does not take a device function.")
    parse_device(device_name)
    yield


# ---------------------------------------------------------------- threads
_settings = {"intra": 0, "inter": 0, "soft_placement": True}   # what tf.config was told


def set_intra_op_parallelism_threads(num_threads):
    """Sets jitgrad's kernel thread count (0: the default, JITGRAD_NUM_THREADS or all cores)."""
    from .codegen import parallel
    num_threads = int(num_threads)
    parallel.set_num_threads(num_threads or None)
    _settings["intra"] = num_threads


def get_intra_op_parallelism_threads():
    return _settings["intra"]


def set_inter_op_parallelism_threads(num_threads):
    """Recorded only: jitgrad runs a Session's kernel as one call (no concurrent ops)."""
    _settings["inter"] = int(num_threads)


def get_inter_op_parallelism_threads():
    return _settings["inter"]


def set_soft_device_placement(enabled):
    """Recorded only: jitgrad places everything on the CPU either way."""
    _settings["soft_placement"] = bool(enabled)


def get_soft_device_placement():
    return _settings["soft_placement"]


def enable_op_determinism():
    """A no-op: jitgrad's results are already bit-identical run to run (README, Numerics)."""


# ---------------------------------------------------------------- functions
def run_functions_eagerly(run_eagerly):
    """``tf.config.run_functions_eagerly``: jitgrad.function then calls the Python function."""
    context.functions_run_eagerly[0] = bool(run_eagerly)


def functions_run_eagerly():
    return context.functions_run_eagerly[0]


# ---------------------------------------------------------------- numerics
def set_flush_denormals(enabled):
    """Flush-denormals mode (jitgrad/denormals.py): True (the default) computes as TF's CPU
    kernels do, denormal float inputs and results as zeros of their sign (FTZ + DAZ);
    False (or ``JITGRAD_FLUSH_DENORMALS=0`` at import) keeps them, as numpy does."""
    if not isinstance(enabled, (bool, np.bool_, int)):
        raise TypeError(f"set_flush_denormals takes a bool, got {type(enabled).__name__}")
    denormals.set_enabled(enabled)


def get_flush_denormals():
    return denormals.enabled()


# ---------------------------------------------------------------- broadcasting shapes
def broadcast_static_shape(shape_x, shape_y):
    """``tf.broadcast_static_shape``: TensorShapes in, TensorShape out; ValueError if incompatible."""
    a, b = as_shape(shape_x), as_shape(shape_y)
    try:
        return TensorShape(broadcast_dims(a.dims, b.dims, "broadcasting"))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: {a} and {b}") from None


def broadcast_dynamic_shape(shape_x, shape_y):
    """``tf.broadcast_dynamic_shape``: two 1-D int shape tensors -> their broadcast shape.
    The shapes must be known without running the graph (eager values, constants,
    ``tf.shape`` of a fully defined tensor); NotImplementedError otherwise."""
    vx, vy = [get_static_value(s) if is_tensorlike(s) else to_numpy(s) for s in (shape_x, shape_y)]
    if vx is None or vy is None:
        raise NotImplementedError("jitgrad's broadcast_dynamic_shape needs shapes known when the graph is built.")
    vx, vy = np.asarray(vx), np.asarray(vy)
    if vx.ndim != 1 or vy.ndim != 1 or vx.dtype.kind not in "iu" or vy.dtype.kind not in "iu":
        raise shape_error(f"broadcast_dynamic_shape takes 1-D integer shapes, got {vx!r} and {vy!r}")
    n = max(len(vx), len(vy))
    px = np.concatenate([np.ones(n - len(vx), vx.dtype), vx])
    py = np.concatenate([np.ones(n - len(vy), vy.dtype), vy])
    if np.any((px != py) & (px != 1) & (py != 1)):
        raise shape_error(f"Incompatible shapes: {vx.tolist()} vs. {vy.tolist()}")
    out = np.where(px == 1, py, px).astype(np.result_type(vx.dtype, vy.dtype))
    return constant(out)


# ---------------------------------------------------------------- the tf.config module tree
def _modules(make):
    threading_ = make("config.threading",
                      set_intra_op_parallelism_threads=set_intra_op_parallelism_threads,
                      get_intra_op_parallelism_threads=get_intra_op_parallelism_threads,
                      set_inter_op_parallelism_threads=set_inter_op_parallelism_threads,
                      get_inter_op_parallelism_threads=get_inter_op_parallelism_threads)
    experimental = make("config.experimental", list_physical_devices=list_physical_devices,
                        list_logical_devices=list_logical_devices, set_memory_growth=set_memory_growth,
                        get_memory_growth=get_memory_growth, get_visible_devices=get_visible_devices,
                        set_visible_devices=set_visible_devices, enable_op_determinism=enable_op_determinism,
                        set_flush_denormals=set_flush_denormals, get_flush_denormals=get_flush_denormals)
    return make("config", list_physical_devices=list_physical_devices, list_logical_devices=list_logical_devices,
                get_visible_devices=get_visible_devices, set_visible_devices=set_visible_devices,
                threading=threading_, experimental=experimental, run_functions_eagerly=run_functions_eagerly,
                functions_run_eagerly=functions_run_eagerly, PhysicalDevice=PhysicalDevice,
                set_soft_device_placement=set_soft_device_placement,
                get_soft_device_placement=get_soft_device_placement,
                LogicalDevice=LogicalDevice, set_flush_denormals=set_flush_denormals,
                get_flush_denormals=get_flush_denormals)
