"""Every op states its facts on its OpDef (ops/registry.py): this walks the registry and fails
for an op the compiler cannot lower, or one that neither has a gradient rule nor says it has
none. Adding an op is one register(...) call plus its lowering and tests."""
import pytest

import jitgrad  # noqa: F401  (registers the ops)
from jitgrad.codegen import lowering_tables
from jitgrad.ops import registry
from jitgrad.ops.registry import DENORMALS, LOWERINGS, NO_GRADIENT_RULE, NOT_DIFFERENTIABLE, REGISTRY, OpDef, register


def problems(opdef, lowered):
    """What is missing from ``opdef``; ``lowered``: the op types codegen has an emitter for."""
    out = []
    if opdef.grad is None and opdef.no_gradient not in (NOT_DIFFERENTIABLE, NO_GRADIENT_RULE):
        out.append("no gradient rule and no grad=NOT_DIFFERENTIABLE / NO_GRADIENT_RULE mark")
    if opdef.grad is not None and opdef.no_gradient is not None:
        out.append("both a gradient rule and a no-gradient mark")
    if opdef.lowering == "codegen" and opdef.name not in lowered:
        out.append("lowering='codegen' but codegen/lower_*.py has no emitter for it")
    if opdef.lowering != "codegen" and opdef.name in lowered:
        out.append(f"lowering={opdef.lowering!r} but codegen has an emitter for it")
    if opdef.lowering == "none" and not (opdef.identity or opdef.name == "NoOp"):
        out.append("lowering='none' but nothing removes it before codegen (identity=True or NoOp)")
    if opdef.reshape and opdef.lowering != "codegen":
        out.append("reshape=True ops are aliased by codegen")
    if opdef.full_reduce not in (None, "sum", "mean", "max", "min", "prod"):
        out.append(f"unknown full_reduce {opdef.full_reduce!r}")
    if opdef.denormals not in DENORMALS:
        out.append("no denormals= (what the flush-denormals mode does to it: flush or keep)")
    if not (isinstance(opdef.cost, int) and opdef.cost >= 1):
        out.append(f"cost must be a positive int, got {opdef.cost!r}")
    return out


def _lowered():
    elementwise, layout, materialise, alias, _ = lowering_tables.tables()
    return set(elementwise) | set(layout) | set(materialise) | set(alias)


def test_every_op_has_a_lowering_and_a_gradient_rule_or_a_mark():
    lowered = _lowered()
    bad = {name: problems(opdef, lowered) for name, opdef in REGISTRY.items()}
    bad = {name: p for name, p in bad.items() if p}
    assert not bad, "\n".join(f"{name}: {'; '.join(p)}" for name, p in sorted(bad.items()))
    # codegen's aliasing is exactly the ops that say reshape=True
    assert set(lowering_tables.tables()[3]) == registry.ops_with("reshape")


def _defined_outside_ops(opdef):
    """The modules outside jitgrad/ops/ that define part of ``opdef`` (shape rule, kernel, gradient)."""
    fns = [getattr(opdef, attr) for attr in ("infer", "kernel", "grad")]
    return sorted({f.__module__ for f in fns if callable(f) and not f.__module__.startswith("jitgrad.ops.")})


def test_every_op_is_defined_in_jitgrad_ops():
    """Adding an op is one file of jitgrad/ops/ (plus its lowering and tests): no op is
    registered from the front end, the passes or the compiler."""
    bad = {name: _defined_outside_ops(opdef) for name, opdef in REGISTRY.items()}
    assert not {name: m for name, m in bad.items() if m}
    assert {"PrintV2", "IdentityN", "Literal"} <= set(REGISTRY)   # the ones that used to live elsewhere
    assert _defined_outside_ops(OpDef("Elsewhere", infer=problems, kernel=None)) == [__name__]


def test_the_walk_can_fail():
    """The checks above catch an op registered without its facts."""
    bare = OpDef("Bare", infer=None, kernel=None)
    assert len(problems(bare, set())) == 3          # no gradient story, no emitter, no denormals
    assert problems(OpDef("Bare", None, None, grad=NOT_DIFFERENTIABLE, lowering="argument", denormals="keep"),
                    set()) == []
    with pytest.raises(ValueError):
        OpDef("Bare", None, None, lowering="somewhere")
    with pytest.raises(ValueError):
        OpDef("Bare", None, None, denormals="sometimes")
    with pytest.raises(ValueError, match="denormals"):   # an op of kind 'other' must say
        register("BareUnclassified", infer=None, kernel=None, grad=NOT_DIFFERENTIABLE, lowering="argument")
    assert "BareUnclassified" not in REGISTRY
    assert OpDef("Bare", None, None, kind="layout").denormals == "keep"
    assert OpDef("Bare", None, None, kind="elementwise").denormals == "flush"
    assert "interpreter" in LOWERINGS


def test_not_differentiable_and_no_gradient_rule_behave_as_tf():
    """NOT_DIFFERENTIABLE: gradients stop (None); NO_GRADIENT_RULE: LookupError, as TF for an op
    with no registered gradient (a graph-mode py_function, README "Known differences")."""
    import jitgrad as tf
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([1.5, 2.0])
        assert tf.gradients(tf.reduce_sum(tf.floor(x)), x) == [None]
        y = tf.py_function(lambda v: v * 2.0, [x], tf.float32)
        with pytest.raises(LookupError):
            tf.gradients(y, x)
