"""Session.run's hot path: once a plan has been hit, Session keeps a *runner*
for (fetch structure, fetch ids, feed ids): a function generated for the
plan that takes the feed values positionally, checks each against the kind
the plan was validated for (so every check Session._fed_list makes still
holds), writes scalars straight into preallocated argument cells and array
data pointers into its own pointer block, calls the kernel and returns the
results in the fetch structure (an output shaped only when the kernel has
run, a grown TensorArray or a cond whose branches differ in shape, is read
from its descriptor as run_plan does).  Anything it does not cover returns
MISS and Session.run takes the general path, which raises TF's errors.
"""
import numpy as np

from . import buffers as _buffers, dynamic_outputs as _dynamic_outputs
from .compiler import _addr, _call, _epoch, _plan_key, _raise_status, _stats
from .ops.random_ops import close_draws, open_draws
from .session import FAST_MISS, feed_array

_F_MAX = 1 << 53   # Python ints that convert to floats exactly (no double rounding)


def _scalar_cases(i, dt):
    """Source lines accepting a Python/numpy scalar (or 0-d array) for 0-d feed i."""
    if dt == np.float32 or dt == np.float64:
        return [f"if t{i} is float: B{i}[0] = v{i}",
                f"elif t{i} is _np_f32 or t{i} is _np_f64: B{i}[0] = float(v{i})",
                f"elif t{i} is int and -_F_MAX <= v{i} <= _F_MAX: B{i}[0] = v{i}"]
    if dt == np.int32 or dt == np.int64:
        lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
        return [f"if t{i} is int and {lo} <= v{i} <= {hi}: B{i}[0] = v{i}",
                f"elif t{i} is _np_i32 or t{i} is _np_i64: B{i}[0] = v{i}"] if dt == np.int64 else \
               [f"if t{i} is int and {lo} <= v{i} <= {hi}: B{i}[0] = v{i}",
                f"elif t{i} is _np_i32: B{i}[0] = v{i}"]
    if dt == np.bool_:
        return [f"if t{i} is bool or t{i} is _np_bool: B{i}[0] = v{i}"]
    return ["if False: pass"]


def make_runner(session, plan, elements, fed, struct):
    """A generated function running ``plan`` (see above). struct: list, tuple
    or None (one fetch).  Returns None when the plan cannot have one."""
    if plan.fallback or not elements:
        return None
    k = plan.kernel
    ns = {"_np_f32": np.float32, "_np_f64": np.float64, "_np_i32": np.int32, "_np_i64": np.int64,
          "_np_bool": np.bool_, "_F_MAX": _F_MAX, "_ND": np.ndarray, "_EMPTY": np.empty, "_addr": _addr,
          "_EMPTY_POOLED": _buffers.empty, "_DESC": _dynamic_outputs.descriptor, "_READ": _dynamic_outputs.read,
          "MISS": FAST_MISS, "_FEED": feed_array, "OPS": session.graph._ops, "GLEN": len(session.graph._ops), "EPOCH": _epoch,
          "E": _epoch[0], "LOCK": k.lock, "CF": k.cfunc, "STATS": _stats, "_raise_status": _raise_status,
          "ST": k.status, "K": k, "_call": _call, "PLAN": plan, "ELEMS": tuple(elements),
          "FEEDS": tuple(t for t, _ in fed)}
    P = plan.ptrs.copy()   # the runner's own pointer block (run_plan rewrites plan.ptrs)
    ns["P"] = P
    ns["PADDR"] = _addr(P)
    slot_of = {pos: slot for slot, pos in plan.feed_slots}
    pre, body, post = [], [], []
    for i, (t, a) in enumerate(fed):
        dt = t.dtype.np
        ns[f"DT{i}"] = np.dtype(dt)
        ns[f"SH{i}"] = a.shape
        body.append(f"t{i} = type(v{i})")
        s = slot_of.get(i)
        if a.shape == ():
            buf = np.zeros(1, dt)
            ns[f"B{i}"] = buf
            cases = _scalar_cases(i, dt)
            body += cases
            body.append(f"{'el' if cases else ''}if t{i} is _ND and v{i}.dtype is DT{i} and v{i}.shape == (): "
                        f"B{i}[0] = v{i}")
            body.append("else: return MISS")
            if s is not None:
                P[s] = _addr(buf)
        else:
            # a Python list fed each run (feed_dict={x: [1., 2.]}): converted and checked as
            # Session.run's general path does, then held in v{i} until the call returns
            ns[f"FT{i}"] = t
            body.append(f"if t{i} is list or t{i} is tuple: v{i} = _FEED(FT{i}, v{i}); t{i} = _ND")
            cond = (f"t{i} is not _ND or v{i}.dtype is not DT{i} or v{i}.shape != SH{i} "
                    f"or not v{i}.flags.c_contiguous")
            body.append(f"if {cond}: return MISS")
            if s is not None:
                body.append(f"P[{s}] = _addr(v{i})")
    if plan.var_slots:
        ns["READ"] = session._store.read
        for j, (slot, key, name, shape, dt) in enumerate(plan.var_slots):
            ns[f"VK{j}"], ns[f"VN{j}"], ns[f"VS{j}"], ns[f"VD{j}"] = key, name, shape, np.dtype(dt)
            body.append(f"w{j} = READ(VK{j}, VN{j})")
            body.append(f"if type(w{j}) is not _ND or w{j}.dtype is not VD{j} or w{j}.shape != VS{j} "
                        f"or not w{j}.flags.c_contiguous: return MISS")
            body.append(f"P[{slot}] = _addr(w{j})")
    for j, (slot, draw) in enumerate(plan.rand_slots):
        ns[f"DRAW{j}"] = draw
        body.append(f"d{j} = DRAW{j}()")    # a local: alive until the call returns
        body.append(f"P[{slot}] = _addr(d{j})")
    write_slots = {s for _, s in plan.write_slots}
    fixed = set()
    for j, (shape, dt) in enumerate(plan.out_specs):
        ns[f"OS{j}"], ns[f"OD{j}"] = shape, dt
        if j in plan.growing:
            # shape known once the kernel has run: it fills a descriptor (dynamic_outputs.py)
            body.append(f"o{j} = _DESC()")
            body.append(f"P[{plan.out_base + j}] = _addr(o{j})")
        elif shape == () and j not in write_slots:
            buf = np.zeros(1, dt)
            ns[f"O{j}"] = buf
            P[plan.out_base + j] = _addr(buf)
            fixed.add(j)
        else:
            # small outputs call np.empty directly: no pool lookup on the hot path
            body.append(f"o{j} = {'_EMPTY_POOLED' if _buffers.recycles(shape, dt) else '_EMPTY'}(OS{j}, OD{j})")
            body.append(f"P[{plan.out_base + j}] = _addr(o{j})")
    body.append("STATS['plan_hits'] += 1")
    call = "_call(K, PADDR)" if k.mt_addr else "CF(PADDR)"
    if plan.rng_slot is None:
        body.append(call)
    else:
        # random ops in regions draw through this call's handle (ops/random_ops.py's
        # region_draws, inline); closed, it finds nothing, so P keeps the stale number
        ns.update(_OPEN=open_draws, _CLOSE=close_draws, SITES=plan.region_sites)
        body += ["h = _OPEN(SITES)", f"P[{plan.rng_slot}] = h", "try:", f"    {call}", "finally:", "    _CLOSE(h)"]
    if plan.has_checks:
        body.append("if ST[0]: _raise_status(int(ST[0]), ST)")
    for j in plan.growing:   # copied out under the lock: the next call reuses the kernel's memory
        body.append(f"o{j} = _READ(o{j}, OS{j}, OD{j})")
    res = []
    for n, s in enumerate(plan.elem_slots):
        if s is None:
            res.append("None")
        elif s in fixed:
            body.append(f"r{n} = O{s}[0]")
            res.append(f"r{n}")
        elif plan.out_specs[s][0] == ():
            res.append(f"o{s}[()]")
        else:
            res.append(f"o{s}")
    if plan.write_slots:
        ns["WRITE"] = session._store.write
        for j, (key, s) in enumerate(plan.write_slots):
            ns[f"WK{j}"] = key
            post.append(f"WRITE(WK{j}, o{s})")
    if struct is None:
        ret = res[0]
    elif struct is tuple:
        ret = "(" + "".join(r + ", " for r in res) + ")"
    else:
        ret = "[" + ", ".join(res) + "]"
    args = ", ".join(f"v{i}" for i in range(len(fed)))
    src = [f"def runner({args}):",
           "    if len(OPS) != GLEN or EPOCH[0] != E: return MISS"]
    src += ["    " + line for line in pre]
    src.append("    with LOCK:")
    src += ["        " + line for line in body]
    src += ["    " + line for line in post]
    src.append(f"    return {ret}")
    code = "\n".join(src)
    exec(compile(code, f"<jitgrad runner {k.key[:12]}>", "exec"), ns)
    runner = ns["runner"]
    runner.source = code
    return runner


def runner_for(session, elements, fed, struct):
    """The fast runner for this run's plan, once the plan has been hit (None
    before, or when it cannot have one)."""
    entry = session._plans.get(_plan_key(session, elements, fed))
    if entry is None:
        return None
    plan = entry[0]
    if plan.fallback or plan.hits < 1:
        return None
    r = plan.runners.get(struct)
    if r is None:
        r = plan.runners[struct] = make_runner(session, plan, elements, fed, struct)
    return r


