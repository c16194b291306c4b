"""The kernel cache key: the one place that says what a kernel's machine code depends on.

A kernel is filed, in memory and on disk, under a sha256 over named components. Each
component is a digest of its own, so two keys compare component by component and a
recompile can be explained ("shapes changed") rather than only detected:

  structure  the ops, their edges and attrs, the argument kinds, which values are fetched
             (and which fetches are operations) and which variables are written, variables
             numbered by first appearance (not which variables: the plan binds those). A
             pre-pass key also covers private attrs (``_aggregation``: the passes read it). Never
             names: renaming a ``tf.gradients`` call is the same kernel.
  shapes     every argument's and value's concrete shape: loops are specialised on them.
  dtypes     every argument's and value's dtype: they choose the instructions.
  constants  each constant argument's value class (``passes.ir.value_class``: 0, 1, -1, 2,
             0.5, ... or "other"). The passes fold those special values; any other value is a
             runtime argument, so a new learning rate does not recompile.
  codegen    the hand-bumped versions below. Bump CODEGEN_VERSION when the code generator
             makes different code for the same program, PREPASS_VERSION when what the
             pre-pass key covers changes (in development the source stamp in ``toolchain``
             already separates edited sources).
  toolchain  jitgrad's version and a stamp of its sources, llvmlite, LLVM, Python, the disk
             format (``cache.disk.environment_fingerprint``): another compiler, other code.
  host       the process triple, LLVM's host CPU name and feature string: code is tuned for,
             and may only run on, this CPU.
  target     the CPU code is generated for when it is not the host (``JITGRAD_TARGET_CPU`` /
             ``_FEATURES`` or a Session's ``jitgrad_target_cpu``, jitgrad.codegen.target):
             it picks the vector width and the matmul blocking; "host" otherwise. Then
             "+keep-denormals" when the flush-denormals mode (the default: MXCSR set on
             entry, jitgrad/denormals.py) is off.

The toolchain and host components come from the environment fingerprint, which the disk
cache also writes into every entry and checks on load; ``HOST_FACTS`` says which of its
fields are the host's.

Recompile reports: every key a run uses is remembered (the last ``REMEMBER`` of them); when
a run compiles, ``why_recompiled`` names the components in which it differs from the closest
remembered key. ``JITGRAD_LOG_RECOMPILES=1`` logs that on every compile (logger
``jitgrad.recompiles``, as JAX's explain_cache_misses / PyTorch's TORCH_LOGS=recompiles);
``jitgrad.explain_recompile(fetches, feed_dict)`` reports it for one run on demand.
"""
import collections
import hashlib
import logging
import os
import threading

import numpy as np

from .. import denormals
from ..codegen.target import current_key
from ..passes.ir import Program
from .disk import environment_fingerprint, make_key

CODEGEN_VERSION = "codegen-48"   # 48: a kernel whose largest GEMM has 2-32 MFLOP, 256+ rows and K 256+ is built parallel, meta "wake" False (fusion_plan.PAR_MIN_FLOPS_AWAKE: runs on threads only while they are awake); 47: a parallel GEMM's row chunks are a few large ones then small ones (matmul.row_chunks: each chunk streams packed B again; W3 dW1 had 20 chunks of 40 rows, now 9); 46: Trigamma is +inf at -inf (a pole, as TF's polygamma(1, x)), not NaN, and Tetragamma lowered (lower_gamma.py; made on a branch beside 40-45); 45: vecmath sigmoid is 1 - sigmoid(-x) for x >= 0 (rounded once: the nearest value, as TF's); 44: Maximum / Minimum return the second operand on a tie (-0. vs 0.), as TF's packed code; 43: Cumsum starts at +0.0 (lower_scan.py: a prefix of -0.0s sums to +0.0, as TF); 42: a Sum / Mean over no dims starts at -0.0 (TF copies x: -0.0 kept), Relu / Relu6 select x > 0 (relu(-0.) is +0.); 41: float32 Tanh is +-1 from TF's clamp 7.90738964 on (lower_elementwise._tanh); 40: Selu / SeluGrad lowered (lower_elementwise.py: TF's kernels, selu no longer a composite); 39: ConvPatches / ConvPatchesGrad lowered (index maps, lower_layout.py: conv2d's im2col and its gradient without a range-checked index table); 38: BitwiseAnd / BitwiseOr / BitwiseXor / Invert / LeftShift / RightShift lowered (lower_elementwise.py); 37: Erfinv / Ndtri lowered (codegen/lower_gamma.py); 36: Lgamma / Digamma / Trigamma lowered (codegen/lower_gamma.py); 35: CumulativeLogsumexp lowered (lower_scan.py); 34: TruncateDiv / TruncateMod lowered (vecmath trunc), their own error code; 33: Asin / Acos / Atan / Atan2 lowered (vecmath, evaluated in float64 for float32 too); 32: Sinh / Cosh / Asinh / Acosh / Atanh lowered (vecmath), exp's core gained a halved form; 31: C = A^T B also in the skinny form (codegen/matmul_skinny.py) when C's rows are wider than a vector but end in a partial one (N % VW != 0, N + 2 <= registers); 30: matmul edge tiles stored (masked targets) through the edge buffer in one loop over rows, a constant-K micro-kernel keeps its k loop for short K, a packed A panel's transposed columns stored as masked vectors (less code, same bits); 29: C = A^T B with C one vector wide or less computed as C^T in L1-resident chunks (codegen/matmul_skinny.py: W3 dW2), whole panels of a row-major packed A copied through an in-register transpose; 28: a transposed-B pack whose K blocks are all shorter than a vector has no transposing loop (it never ran; W3 dH cold compile); 27: icelake-server float32 GEMMs use a 12 x 32 register tile and MC 72 (target._MATMUL_CPU); 26: inside a parallel kernel, nests from PAR_MIN_WORK_JOINED and GEMMs from PAR_MIN_FLOPS_JOINED split across its threads too (fusion_plan.py); 25: flush-denormals (FTZ + DAZ wrappers, denormal-fp-math attributes) is the default mode and its keys are the unsuffixed ones, so kernels filed unflushed under them before must not be found; 24: column reductions (last dim kept) walk up to 8 vectors of columns per pass over the rows (lower_reduction.emit_reduce); 22: DCE keeps random draws inside regions (RegionRandom, an If / While holding one) whose values nothing reads, as the interpreter draws them; 21: TopKV2 sorts whole rows (counting ranks for n <= 128, LSD radix beyond) unless k is a small part of a long row (the heap, of packed integer keys for 32-bit dtypes); 20: TopKV2 (a heap per row), Xlogy / Xdivy / Xlog1py elementwise, SegmentReduction (ids checked in the kernel); 19: matmul loop bodies address from laundered bases (irutil.loop_base: LLVM's loop strength reduction sees the bases, not each access), one A base for the micro-kernel's MR rows; 18: the loop around a short scalar innermost run left to LLVM's unroller, not its vectoriser (no gathers), a parallel GEMM's B-packing function in its compute function's unit, splat vector constants printed short (same machine code), micro-kernel pointers based per unrolled step, taller matmul tile for narrow C with A^T read in place, masked edge-tile stores (AVX2/AVX-512), BroadcastToShapeOf between two row sources, vectorised inner-axis gather gradient on rows, ZeroRows, SetRow on run-time rows, While variables of run-time rows stored in place, While variables no one needs carried unchanged; 17: host AVX-512 code at 512 bits (-prefer-256-bit); 16: ListCheck materialised, row-slice counts without overflow, BatchMatMulV2 row broadcast; 15: one noinline barrier function per module, called per site; 14: large matmul units get SIDE_PASSES, not O2; 13: matmul units (O2, no LLVM vectorisers) bundled; 12: target-chosen matmul blocking
PREPASS_VERSION = "prepass-3"     # 3: DCE keeps unread random draws of regions (the same pre-pass program now compiles with them); 2: the graph's per-call gradient aggregation records left the key

PROGRAM_COMPONENTS = ("structure", "shapes", "dtypes", "constants")
COMPONENTS = PROGRAM_COMPONENTS + ("codegen", "toolchain", "host", "target")
HOST_FACTS = ("triple", "cpu", "features")
REMEMBER = 512

log = logging.getLogger("jitgrad.recompiles")


class KernelKey:
    """``hex`` (what caches file kernels under) and, per component, a digest and a short
    summary a person can read."""
    __slots__ = ("hex", "kind", "digests", "summaries")

    def __init__(self, kind, digests, summaries, hex_):
        self.kind, self.digests, self.summaries, self.hex = kind, digests, summaries, hex_

    def changed_from(self, other):
        """The components in which this key differs from ``other``."""
        return [c for c in COMPONENTS if self.digests[c] != other.digests[c]]

    def describe(self):
        return "\n".join(f"  {c:<10} {self.digests[c][:12]}  {self.summaries[c]}" for c in COMPONENTS)

    def __repr__(self):
        return f"KernelKey({self.kind}, {self.hex[:16]}...)"


def _digest(parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def _short(items, limit=6):
    items = list(items)
    text = ", ".join(map(str, items[:limit]))
    return f"[{text}{', ...' if len(items) > limit else ''}] ({len(items)})"


def _program_parts(program, private_attrs):
    """{component: what its digest covers} for the four components the program decides."""
    args, nodes = program.args, program.nodes
    # Which variable an argument or a write is matters only as "the same one as before":
    # the plan binds each variable to its slot, the machine code never sees it. So variables
    # enter the key by order of appearance, and a model built again over new variables (a
    # second Keras model, a strategy's replica) shares its kernels.
    order = {}

    def var(k):
        return order.setdefault(k, len(order))
    structure = [(a.kind, var(a.key) if a.kind == "var" else None) for a in args]
    for n in nodes:
        attrs = freeze(n.attrs)               # leaves out private attrs
        private = private_attrs and {"p" + k: v for k, v in n.attrs.items() if k.startswith("_")}
        if private:
            attrs = (attrs, freeze(private))
        structure.append((n.op, tuple((i.node, i.index) for i in n.inputs), attrs, len(n.outputs)))
    structure.append([None if v is None else (v.node, v.index) for v in program.outputs])
    structure.append([(var(k), v.node, v.index) for k, v in program.var_writes])
    return {
        "structure": structure,
        "shapes": [a.shape for a in args] + [[s for s, _ in n.outputs] for n in nodes],
        "dtypes": [a.dtype.name for a in args] + [[d.name for _, d in n.outputs] for n in nodes],
        "constants": [a.value_class for a in args],
    }


def _program_summaries(program):
    args = program.args
    ops = collections.Counter(n.op for n in program.nodes if n.op != "Arg")
    return {
        "structure": f"{len(program.nodes)} nodes: " + ", ".join(
            f"{op} x{c}" if c > 1 else op for op, c in sorted(ops.items())),
        "shapes": "args " + _short(a.shape for a in args),
        "dtypes": "args " + _short(a.dtype.name for a in args),
        "constants": "value classes " + _short(a.value_class for a in args if a.kind == "const"),
    }


def freeze(x):
    """A hashable, repr-stable form of an attr value."""
    if isinstance(x, Program):   # a control-flow region (passes/regions.py)
        return ("program", program_digest(x))
    if isinstance(x, dict):
        return tuple(sorted((k, freeze(v)) for k, v in x.items() if not k.startswith("_")))
    if isinstance(x, (list, tuple)):
        return tuple(freeze(v) for v in x)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, hashlib.sha256(x.tobytes()).hexdigest())
    if hasattr(x, "name") and hasattr(x, "np"):  # DType
        return ("dtype", x.name)
    return x


def program_digest(program):
    """One digest of the program's own components (the pipeline's fixed-point test compares these)."""
    parts = _program_parts(program, False)
    return _digest([_digest(parts[c]) for c in PROGRAM_COMPONENTS])


def _environment_components(fingerprint):
    host = {k: fingerprint.get(k) for k in HOST_FACTS}
    tool = {k: v for k, v in fingerprint.items() if k not in HOST_FACTS}
    feats = str(host.get("features") or "")
    return {
        "toolchain": (_digest(sorted(tool.items())),
                      ", ".join(f"{k} {tool[k]}" for k in ("jitgrad", "llvmlite", "llvm", "python") if k in tool)
                      + (f", sources {str(tool['jitgrad_source'])[:8]}" if "jitgrad_source" in tool else "")),
        "host": (_digest(sorted(host.items())),
                 f"{host.get('triple')} {host.get('cpu')} ({len(feats.split(',')) if feats else 0} features)"),
    }


def _build(kind, program, private_attrs, version, fingerprint, flush):
    fp = environment_fingerprint() if fingerprint is None else fingerprint
    parts, summaries = _program_parts(program, private_attrs), _program_summaries(program)
    comps = {c: (_digest(parts[c]), summaries[c]) for c in PROGRAM_COMPONENTS}
    comps["codegen"] = (_digest([version, CODEGEN_VERSION]), f"{version}, {CODEGEN_VERSION}")
    comps.update(_environment_components(fp))
    target = current_key() + denormals.cache_tag(flush)   # the flush-denormals mode: other code
    comps["target"] = (_digest([target]), target)
    digests = {c: comps[c][0] for c in COMPONENTS}
    inner = "\0".join(f"{c}={digests[c]}" for c in PROGRAM_COMPONENTS + ("codegen",)) + \
        ("" if target == "host" else f"\0target={digests['target']}")   # host keys as before
    return KernelKey(kind, digests, {c: comps[c][1] for c in COMPONENTS}, make_key(inner, fp))


def _mode(flush):
    """``flush`` as given, or the mode now: a compile passes the value it also gives the
    code generator (compiler.py), so key and code are of one mode."""
    return denormals.enabled() if flush is None else bool(flush)


def pre_pass_key(program, fingerprint=None, flush=None):
    """Key of a canonical program *before* the passes. The passes are deterministic functions
    of what it covers (private attrs included) and their code is in ``toolchain``, so this
    key alone decides the machine code: a hit needs no passes and no code generator."""
    return _build("pre-pass", program, True, PREPASS_VERSION, fingerprint, _mode(flush))


def post_pass_key(program, fingerprint=None, flush=None):
    """Key of an optimised program: programs that only become equal after the passes share
    one kernel within a process."""
    return _build("post-pass", program, False, "post-pass", fingerprint, _mode(flush))


# ---------------------------------------------------------------- recompile reports
_seen = collections.OrderedDict()     # hex -> KernelKey, the keys runs used, most recent last
_seen_lock = threading.Lock()


def remember(key):
    with _seen_lock:
        _seen[key.hex] = key
        _seen.move_to_end(key.hex)
        while len(_seen) > REMEMBER:
            _seen.popitem(last=False)


def forget_all():
    with _seen_lock:
        _seen.clear()


def closest(key):
    """(remembered key of the same kind with the fewest differing components, those
    components), or (None, None) when none is remembered."""
    with _seen_lock:
        others = [k for h, k in _seen.items() if h != key.hex and k.kind == key.kind]
    best, best_changed = None, None
    for other in reversed(others):                 # the most recent wins a tie
        changed = key.changed_from(other)
        if best is None or len(changed) < len(best_changed):
            best, best_changed = other, changed
    return best, best_changed


def why_recompiled(key):
    """A few lines naming what differs from the closest kernel this process has used."""
    other, changed = closest(key)
    if other is None:
        return f"kernel {key.hex[:16]}: first kernel of its kind in this process (nothing to compare with)"
    lines = [f"kernel {key.hex[:16]} differs from kernel {other.hex[:16]} in: {', '.join(changed)}"]
    for c in changed:
        lines.append(f"  {c}: {other.summaries[c]}  ->  {key.summaries[c]}")
    return "\n".join(lines)


def log_recompiles():
    return os.environ.get("JITGRAD_LOG_RECOMPILES", "").strip().lower() not in ("", "0", "false", "off", "no")


def note_compile(key):
    """Called when a run compiles: logs the reason when JITGRAD_LOG_RECOMPILES is set."""
    if log_recompiles():
        log.warning("jitgrad recompile: %s", why_recompiled(key))
