"""Compiling a run whose shapes depend on values (tf.range(n), tf.zeros([n]),
tf.reshape(x, s), x[i:j] with a fed ``n`` / ``s`` / ``i`` / ``j``), as XLA does:
before each run the small host subgraph that computes those values (their
*shape sources*) is evaluated with the reference interpreter from the feeds
and variables, and the run is compiled specialised on the values: each such op
becomes its static form (ops' ``specialise`` fact: Fill with dims, Reshape with
a shape, StridedSlice with bounds, a Range its constant), so the values are in
the kernel's cache key (as attrs, or a constant's shape) and every new value
set compiles once. Only top-level ops: a shape computed inside a loop body is
left to the interpreter, as is a shape source with side effects (random draws,
variable writes, prints), which must not run twice.
"""
import collections

from .ops.registry import REGISTRY
from .passes.prune import prune

SPECIALISATIONS_PER_PLAN = 64   # value sets kept per plan (LRU); each is one compiled kernel


def shape_sources(ops):
    """The tensors whose values set the shapes of the specialisable ops among
    ``ops`` (a pruned run), or None when some data-dependent op cannot be specialised."""
    sources, seen = [], set()
    for op in ops:
        opdef = REGISTRY[op.type]
        if not opdef.data_dependent_shape:
            continue
        if opdef.specialise is None:
            return None
        for t in shape_inputs(op):
            if id(t) not in seen:
                seen.add(id(t))
                sources.append(t)
    return sources


def shape_inputs(op):
    """The inputs of a specialisable op that set its shape (OpDef.shape_from on)."""
    return op.inputs[REGISTRY[op.type].shape_from:]


def _pure(ops):
    return all(not REGISTRY[op.type].stateful and REGISTRY[op.type].kind not in ("random", "state")
               and op.type not in ("PrintV2", "Assert") and not REGISTRY[op.type].data_dependent_shape
               for op in ops)


class Specialiser:
    """The plan of a run that needs shape values: evaluates them, then runs the
    plan compiled for them (made by ``make_plan(..., shape_values=...)``)."""

    def __init__(self, sources, make_plan, run_plan, evaluate):
        self.sources = sources
        self._make_plan, self._run_plan, self._evaluate = make_plan, run_plan, evaluate
        self.plans = collections.OrderedDict()   # value key -> plan

    def values(self, session, fed):
        vals = self._evaluate(self.sources, {id(t): a for t, a in fed}, session._store)
        return {id(t): v for t, v in zip(self.sources, vals)}

    def describe(self, values):
        return "\n".join(f"  {t.name} = {values[id(t)].tolist()}" for t in self.sources)

    def plan_for(self, session, elements, fed):
        values = self.values(session, fed)
        key = tuple((v.dtype.str, v.shape, v.tobytes()) for v in values.values())
        plan = self.plans.get(key)
        if plan is None:
            plan = self._make_plan(session, elements, fed, shape_values=values)
            self.plans[key] = plan
            if len(self.plans) > SPECIALISATIONS_PER_PLAN:
                self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return plan

    def run(self, session, fed, elements):
        return self._run_plan(session, self.plan_for(session, elements, fed), fed, elements)


def specialiser_for(elements, fed, make_plan, run_plan, evaluate):
    """A Specialiser for a run whose program has data-dependent shapes, or None
    when they cannot be specialised (the run then goes to the interpreter)."""
    fed_ids = {id(t) for t, _ in fed}
    sources = shape_sources(prune(elements, fed_ids))
    if not sources:
        return None
    if not _pure(prune(sources, fed_ids)):
        return None
    return Specialiser(sources, make_plan, run_plan, evaluate)


class _StaticForm:
    """What passes/ir.from_graph reads of an op, for its specialised static form:
    the original's name and outputs (so a run's shapes are checked against the
    graph's static ones), the static op's attrs, the inputs it keeps."""
    __slots__ = ("type", "name", "attrs", "inputs", "outputs", "control_inputs")

    def __init__(self, op, op_type, attrs, n_inputs):
        self.type, self.name, self.attrs = op_type, op.name, attrs
        self.inputs, self.outputs, self.control_inputs = op.inputs[:n_inputs], op.outputs, op.control_inputs


def static_form(op, shape_values):
    """(op type, attrs, kept inputs) of the specialised op, ("Const", value, ()) for a
    Range; None when its shape values are not among ``shape_values``."""
    if shape_values is None:
        return None
    ins = shape_inputs(op)
    if any(id(t) not in shape_values for t in ins):
        return None
    op_type, attrs = REGISTRY[op.type].specialise(op.attrs, *[shape_values[id(t)] for t in ins])
    if op_type == "Const":
        return op_type, attrs, None
    return op_type, attrs, _StaticForm(op, op_type, attrs, len(op.inputs) - len(ins))
