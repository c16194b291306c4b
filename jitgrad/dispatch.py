"""The calls the front end makes into parts that are installed later.

Graph building, ``Session.run`` and the eager fast paths call through these names instead
of importing what they call, so that imports stay one-way (ops/ never imports the eager
executor, the session never imports the compiler) and ``import jitgrad`` loads neither
llvmlite nor the code generator. Each is set once, by the module named, when it loads:

  eager_execute(opdef, inputs, attrs)    eager.py: run one op now
  eager_types, eager_tensor              eager.py: the exact eager tensor classes (a set)
                                         and EagerTensor, for the fast paths' type tests
  eager_variable                         eager_variable.py: EagerVariable (tf.Variable made
                                         eagerly); () until then, so isinstance is False
  indexed_slices                         indexed_slices.py: tf.IndexedSlices, which the clip
                                         ops take (indexed_slices.py imports the ops)
  batch_execute(opdef, inputs, attrs)    tape.py: an op with a BatchedTensor input while a
                                         vectorised jacobian runs (eager.batching)
  compiled_execute(session, elements, fed) -> values
                                         jitgrad/__init__.py: a stub that imports the
                                         compiler on the first compiled run and puts
                                         jitgrad.compiler.execute here
  make_runner(session, elements, fed, struct) -> runner or None
                                         jitgrad.fast_runner.runner_for, set with it (None
                                         until the compiler is loaded)
  stack(values, name=...) -> Tensor    ops/array_ops.py: tf.stack, which convert_to_tensor
                                         packs a list holding tensors with (TF's autopacking,
                                         which array_ops registers too; convert.py is below ops/)
  read_in_trace(var, graph) -> Tensor  function.py: an eager variable's value inside the
                                         jitgrad.function trace (tape.py is below function.py)
  gradient_source_in_trace(var) -> Tensor
                                       function.py: the read GradientTape differentiates
                                         with respect to for an eager variable in a trace
  default_session_for(graph, session) -> Session
                                         session.py: the session Tensor.eval and
                                         Operation.run use (graph.py sits below session.py)
"""
eager_execute = None
eager_types = frozenset()
eager_tensor = None
eager_variable = ()
indexed_slices = ()
batch_execute = None
compiled_execute = None
make_runner = None
default_session_for = None
read_in_trace = None
gradient_source_in_trace = None
stack = None
