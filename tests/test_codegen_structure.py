"""The code generator's structure: fusion and buffer planning are passes with
typed results, checked here on small programs whose plans are derived by hand;
the lowerings use only lowering_context.py's small interface and never
import kernel.py (no import cycle)."""
import ast
import glob
import os

import numpy as np

import jitgrad as tf
from jitgrad import compiler
from jitgrad.codegen import kernel, lowering_context
from jitgrad.codegen.buffer_plan import plan_buffers
from jitgrad.codegen.fusion_plan import plan_fusion
from jitgrad.codegen.irutil import ALIGN
from jitgrad.passes import ir
from jitgrad.passes.prune import prune

CODEGEN = os.path.dirname(kernel.__file__)
# the modules that get a `kb`: each kind of op's lowering, and the run-time stacks two of them share
LOWERINGS = sorted(glob.glob(os.path.join(CODEGEN, "lower_*.py"))) + [os.path.join(CODEGEN, "stacks.py")]


def _program(fetches, feeds):
    fed = [(t, np.zeros(t.shape, t.dtype.np)) for t in feeds]
    ops = prune(fetches, {id(t) for t, _ in fed})
    return compiler.optimise(ir.from_graph(ops, fetches, fed, None))


def _node(p, op):
    (i,) = [i for i, n in enumerate(p.nodes) if n.op == op]
    return ir.Value(i, 0)


def _plan_buffers(p, fusion):
    slot_of_val = {v: s for s, v in enumerate(fusion.out_vals)}
    return plan_buffers(p, fusion, slot_of_val, [], {}, 0)


def test_fusion_plan_one_nest_stores_and_reduces_a_twice_read_value_inline():
    # m = e * e with e = exp(x): e is read twice but only at m's own element inside m's
    # nest, so it is recomputed there (soft), and sum(m) accumulates in the same nest.
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1000])
        e = tf.exp(x)
        m = e * e
        s = tf.reduce_sum(m)
    p = _program([m, s], [x])
    ev, mv, sv = _node(p, "Exp"), _node(p, "Mul"), _node(p, "Sum")
    plan = plan_fusion(p, allow_parallel=True)
    assert plan.soft == {ev}
    assert plan.mat == {mv, sv}
    assert plan.out_vals == [mv, sv]
    (nest,) = plan.nests
    assert [(u.kind, u.val) for u in nest.units] == [("store", mv), ("reduce", sv)]
    assert nest.units[1].rkind == "sum"
    assert nest.shape == (1000,) and nest.runs == [(1000, 0)]
    assert not nest.parallel and not plan.parallel and plan.par_slots == 1


def test_fusion_plan_marks_big_nests_parallel_only_when_allowed():
    n = 1 << 22   # 256 blocks of BLOCK_ELEMS: worth splitting
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [n])
        s = tf.reduce_sum(tf.exp(x))
    p = _program([s], [x])
    par = plan_fusion(p, allow_parallel=True)
    assert par.parallel and par.nests[0].parallel and 2 <= par.par_slots <= 8
    serial = plan_fusion(p, allow_parallel=False)
    assert not serial.parallel and not serial.nests[0].parallel and serial.par_slots == 1


def test_buffer_plan_reuses_the_memory_of_a_dead_value():
    # r1 [64] is read last by r2's node, r2 [8] by r3's node: r3 [2] is born after r1
    # died, so first fit puts it at r1's offset 0, while r2 (live with both) sits after r1.
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [64, 64])
        r1 = tf.reduce_max(x, 1)
        r2 = tf.reduce_max(tf.reshape(r1, [8, 8]), 1)
        r3 = tf.reduce_max(tf.reshape(r2, [2, 4]), 1)
        r4 = tf.reduce_max(r3)
    p = _program([r4], [x])
    maxes = [ir.Value(i, 0) for i, n in enumerate(p.nodes) if n.op == "Max"]
    v1, v2, v3, v4 = maxes
    fusion = plan_fusion(p, allow_parallel=True)
    assert fusion.mat == {v1, v2, v3, v4}
    bp = _plan_buffers(p, fusion)
    off = {v: bp.offsets[("val", v)] for v in (v1, v2, v3)}
    assert ("val", v4) not in bp.offsets           # the output lives in its output slot
    assert off[v1] == 0 and off[v2] == 64 * 4      # 64 float32 = 256 bytes, ALIGN-aligned
    assert off[v3] == off[v1]
    assert bp.arena_bytes == 64 * 4 + ALIGN        # r2 (32 bytes) rounds up to one ALIGN block
    assert bp.born[v1] < bp.last_use[v1] < bp.born[v3]


def test_buffer_plan_never_overlaps_live_buffers_of_a_training_step():
    # value and gradients of a small MLP: every pair of scratch buffers that are live
    # at the same time occupies disjoint bytes of the arena, and every one is aligned
    g = tf.Graph()
    with g.as_default():
        X = tf.compat.v1.placeholder(tf.float32, [32, 16])
        W1 = tf.compat.v1.placeholder(tf.float32, [16, 24])
        W2 = tf.compat.v1.placeholder(tf.float32, [24, 3])
        h = tf.tanh(tf.matmul(X, W1))
        z = tf.matmul(h, W2)
        loss = tf.reduce_mean(tf.reduce_logsumexp(z, axis=1) - tf.reduce_max(z, axis=1) * tf.exp(z[:, 0]))
        grads = tf.gradients(loss, [W1, W2])
    p = _program([loss] + grads, [X, W1, W2])
    fusion = plan_fusion(p, allow_parallel=False)
    bp = _plan_buffers(p, fusion)
    spans = []
    for key, o in bp.offsets.items():
        assert o % ALIGN == 0
        if key[0] == "val":
            v = key[1]
            shape, dt = p.nodes[v.node].outputs[v.index]
            spans.append((bp.born[v], bp.last_use[v], o, o + int(np.prod(shape, dtype=np.int64)) * dt.size))
    assert len(spans) >= 3
    for i, (b0, e0, lo0, hi0) in enumerate(spans):
        assert hi0 <= bp.arena_bytes
        for b1, e1, lo1, hi1 in spans[i + 1:]:
            if b0 <= e1 and b1 <= e0:   # live at the same time
                assert hi0 <= lo1 or hi1 <= lo0


def _kb_attributes(path, group=None):
    """Every ``kb.<name>`` (or, with group, ``kb.<group>.<name>``) a lowering module reads or writes."""
    tree = ast.parse(open(path).read())
    if group is None:
        return {n.attr for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "kb"}
    return {n.attr for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == group
            and isinstance(n.value.value, ast.Name) and n.value.value.id == "kb"}


def test_lowerings_use_only_the_lowering_context():
    groups = {None: lowering_context.INTERFACE, "threads": lowering_context.THREADS,
              "regions": lowering_context.REGIONS}
    for group, allowed in groups.items():
        used = set()
        for path in LOWERINGS:
            extra = _kb_attributes(path, group) - allowed
            where = "kb." + (group + "." if group else "")
            assert not extra, f"{os.path.basename(path)} uses {where}{sorted(extra)} outside lowering_context.py"
            used |= _kb_attributes(path, group)
        # the interface lists nothing that no lowering needs
        assert used == allowed, (group, allowed - used)
        assert all(not name.startswith("_") for name in allowed)
    # small: a lowering learns a handful of names per job, not the builder's attributes
    assert len(lowering_context.INTERFACE) <= 17 and max(len(lowering_context.THREADS),
                                                          len(lowering_context.REGIONS)) <= 10
    # a built builder implements all of it
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 4])
        y = tf.matmul(x, x) + 1.0
    kb = kernel.KernelBuilder(_program([y], [x]), "jg_structure_test")
    kb.build()
    assert isinstance(kb, lowering_context.LoweringContext)
    assert [name for name in sorted(lowering_context.INTERFACE) if not hasattr(kb, name)] == []
    for group in ("threads", "regions"):
        view = getattr(kb, group)
        assert [name for name in sorted(groups[group]) if not hasattr(view, name)] == []
    assert kb.threads.tid is kb.tid and kb.regions.arena is kb.arena and kb.regions.node_pos == kb.cur_pos
    kb.regions.persistent_words += 2
    assert kb.persistent_words == 2


def test_lowerings_do_not_import_the_kernel_builder():
    for path in LOWERINGS + [os.path.join(CODEGEN, f) for f in ("irutil.py", "fusion_plan.py", "buffer_plan.py",
                                                                 "lowering_tables.py", "lowering_context.py")]:
        for n in ast.walk(ast.parse(open(path).read())):
            if isinstance(n, ast.ImportFrom):
                assert n.module != "kernel" and not (n.module or "").endswith(".kernel"), path
                assert not (n.module is None and any(a.name == "kernel" for a in n.names)), path
