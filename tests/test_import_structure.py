"""The package's import structure: imports at the top of a module, one-way.

An import inside a function hides a dependency (and usually an import cycle).
Each one left is listed here with why it must wait until the function runs:
the module imports llvmlite or the compiler, which `import jitgrad` must not
load (a process whose kernels all come from the disk cache never loads LLVM);
it is an optional dependency; or it is a large part of the package that only
some programs use, kept out of `import jitgrad`'s time.  A new one fails the
test until it is justified here, and a removed one fails it until it is taken
off the list, so the count cannot creep back.

Private names (`_x`) stay inside their module: a module that needs another's
helper imports a public name.  The imports of private names that remain are
listed too and may only go away.
"""
import ast
import os

import jitgrad

PACKAGE = os.path.dirname(jitgrad.__file__)

LLVMLITE = "imports llvmlite (or the code generator, which does): not at `import jitgrad`, not on a warm run"
COMPILER = "the compiler, loaded on the first compiled run"
OPTIONAL = "optional dependency"
IMPORT_TIME = "large, used by some programs only: kept out of `import jitgrad`'s time"

# module (path in the package) -> [(imported module, why), ...], one entry per import statement
FUNCTION_LEVEL_IMPORTS = {
    "__init__.py": [("compiler, fast_runner", COMPILER), ("compiler", COMPILER), ("compiler", COMPILER),
                    ("kernel_explain", COMPILER)],
    "cache/disk.py": [("llvmlite", LLVMLITE), ("llvmlite", LLVMLITE)],
    "cache/native.py": [("llvmlite.binding", LLVMLITE)],
    "codegen/compile_server.py": [("backend", LLVMLITE + "; the server process loads it to compile"),
                                  ("backend", LLVMLITE)],
    "codegen/lowering_tables.py": [("lower_*", LLVMLITE)],
    "compiler.py": [("codegen.irutil", LLVMLITE), ("passes.pipeline", "not on a warm run: the disk cache is "
                                                   "looked up by the pre-pass key"),
                    ("codegen.backend", LLVMLITE), ("codegen.kernel", LLVMLITE), ("codegen.irutil", LLVMLITE)],
    "config.py": [("codegen.parallel", COMPILER)],
    "control_flow.py": [("autograph.operators", IMPORT_TIME), ("autograph.staged_tensor_array", IMPORT_TIME)],
    "denormals.py": [("denormal_scan, mxcsr_host", "the disk cache and codegen.target (hashlib; LLVM on a cache miss): "
                                    "when the flush-denormals mode first runs a reference kernel, not at "
                                    "`import jitgrad`")],
    "demo.py": [("seeds.eager_examples", "optional: absent from some builds")],
    "distribute/strategy.py": [("distributed", OPTIONAL), ("dask", OPTIONAL)],
    "distribute/worker.py": [("distributed", OPTIONAL)],
    "dtypes.py": [("ml_dtypes", OPTIONAL), ("ml_dtypes", OPTIONAL)],
    "func_graph.py": [("interpreter", IMPORT_TIME + " (the IR and its passes)")],
    "function.py": [("autograph", IMPORT_TIME), ("autograph.asserts", IMPORT_TIME)],
    "hessians.py": [("batched_gradients", IMPORT_TIME)],
    "keras/base_layer.py": [("autograph", IMPORT_TIME)],
    "kernel_explain.py": [("codegen.backend", LLVMLITE), ("codegen.kernel", LLVMLITE)],
    "ops/control_flow_ops.py": [("passes.ir", IMPORT_TIME)],
    "ops/logging_ops.py": [("cache.elf", COMPILER), ("hashlib", IMPORT_TIME + " (OpenSSL: 3-4 ms)")],
    "ops/random_ops.py": [("cache.elf", COMPILER)],
    "ops/nn_ops.py": [("custom_gradient", "custom_gradient builds on the tape, which builds on the op modules "
                                         "(silu carries TF's gradient through it)")],
    "ops/libm_loops.py": [("cache.native", COMPILER), ("codegen.target", LLVMLITE)],
    "ops/philox_native.py": [("cache.native", COMPILER), ("codegen.target", LLVMLITE)],
    "ops/random_generator.py": [("variables", "cycle: variables imports the op modules")],
    "ops/reduction_ops.py": [("custom_gradient", "custom_gradient builds on the tape, which builds on the op "
                                                 "modules (reduce_euclidean_norm carries TF's gradient through it)")],
    # from_graph builds If / While sub-programs through regions.region_node, which calls
    # from_graph for each branch / body: one recursion split over two modules
    "passes/ir.py": [("regions", "recursion: region_node calls from_graph")],
    # (the dense TensorArray of a run-time size is a subclass, in a module that imports this one)
    "tensor_array.py": [("autograph.staged_tensor_array", "cycle: its LoopTensorArray subclasses TensorArray")],
    # (the status codes' messages are codegen/irutil.py's one table; read only when a check fails)
    "ops/list_ops.py": [("codegen.irutil", LLVMLITE)],
    "session.py": [("codegen.target", COMPILER), ("interpreter", IMPORT_TIME), ("codegen.target", COMPILER),
                   ("kernel_explain", COMPILER), ("codegen.target", COMPILER)],
    "tape.py": [("batched_gradients", IMPORT_TIME), ("batched_gradients", IMPORT_TIME)],
}

# (module, private name it imports from another module): may only shrink
PRIVATE_IMPORTS = {
    ("batched_gradients.py", "_spec_index"), ("control_flow.py", "_make_if"), ("control_flow.py", "_make_while"), ("control_flow.py", "_dry"),
    ("data.py", "_seeds"), ("distribute/strategy.py", "_flat_tensors"), ("eager.py", "_Reference"),
    ("eager_variable.py", "_ids"), ("eager_variable.py", "_Reference"), ("fast_runner.py", "_addr"),
    ("fast_runner.py", "_call"), ("fast_runner.py", "_epoch"), ("fast_runner.py", "_plan_key"),
    ("fast_runner.py", "_raise_status"), ("fast_runner.py", "_stats"), ("function.py", "_in_graph"),
    ("functional_ops.py", "_to_tensor"),
    ("functional_ops.py", "_make_while"), ("keras_optimizers.py", "_new_variable"), ("kernel_explain.py", "_disk"), ("kernel_explain.py", "_kernels"),
    ("kernel_explain.py", "_klock"), ("loop_jacobians.py", "_make_while"), ("ops/linalg_ops.py", "_static_value"),
    ("ops/nn_ops.py", "_static_value"),
    ("ops/reduction_ops.py", "_int_arg"), ("passes/regions.py", "_merge_dims"), ("session.py", "_Reference"), }


def _modules():
    for root, _, files in os.walk(PACKAGE):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(root, f)
                yield os.path.relpath(path, PACKAGE).replace(os.sep, "/"), ast.parse(open(path).read())


def _function_level_imports(tree):
    seen, out = set(), []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in seen:
                    seen.add(id(node))
                    out.append(node)
    return out


def _is_jitgrad_import(node):
    return isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("jitgrad"))


def test_function_level_imports_are_the_justified_ones():
    found = {name: len(_function_level_imports(tree)) for name, tree in _modules()}
    found = {name: n for name, n in found.items() if n}
    listed = {name: len(entries) for name, entries in FUNCTION_LEVEL_IMPORTS.items()}
    assert found == listed
    assert sum(listed.values()) <= 53   # (46: ops/list_ops.py's messages of irutil's status codes; 47: denormals.py's native helpers; 52: the Philox and libm loops (ops/philox_native.py, ops/libm_loops.py), compiled when a draw first runs, and the Generator's variable; 53: silu's custom gradient)


def test_no_module_imports_a_private_name_of_another():
    found = set()
    for name, tree in _modules():
        for node in ast.walk(tree):
            if _is_jitgrad_import(node):
                found |= {(name, a.name) for a in node.names if a.name.startswith("_") and not a.name.startswith("__")}
    assert found - PRIVATE_IMPORTS == set(), "import a public name (or give the helper one)"
    assert PRIVATE_IMPORTS - found == set(), "gone: take it off PRIVATE_IMPORTS"
    # the code generator's modules use only each other's public names
    assert not {m for m, _ in found if m.startswith(("codegen/", "passes/", "cache/")) and m != "passes/regions.py"}


def test_the_structure_rules_fail_on_what_they_forbid():
    # the two scanners above, on a snippet that breaks both rules
    tree = ast.parse("from .x import _helper\ndef f():\n    from .y import z\n    import os\n")
    assert len(_function_level_imports(tree)) == 2
    (node,) = [n for n in ast.walk(tree) if _is_jitgrad_import(n) and n.names[0].name == "_helper"]
    assert node.module == "x"
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _top_level_imports("ops/x.py", ast.parse("from ..graph import T\nfrom . import y")) == {
        "jitgrad.graph", "jitgrad.graph.T", "jitgrad.ops", "jitgrad.ops.y"}


def _module_name(path):
    return "jitgrad" + ("." + path[:-3].replace("/", ".")).removesuffix(".__init__")


def _top_level_imports(path, tree):
    """The jitgrad modules the module at ``path`` imports at its top level."""
    package = _module_name(path) if path.endswith("__init__.py") else _module_name(path).rsplit(".", 1)[0]
    in_functions = {id(n) for n in _function_level_imports(tree)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in in_functions or not _is_jitgrad_import(node):
            continue
        base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
        mod = ".".join(base + ([node.module] if node.module else []))
        out |= {mod} | {f"{mod}.{a.name}" for a in node.names}
    return out


def _cycles(graph):
    """The groups of modules that import each other, directly or through others."""
    def reach(m):
        seen, todo = set(), [m]
        while todo:
            for d in graph[todo.pop()] - seen:
                seen.add(d)
                todo.append(d)
        return seen
    reached = {m: reach(m) for m in graph}
    groups = {frozenset({m} | {d for d in reached[m] if m in reached[d]}) for m in graph}
    return sorted(sorted(g) for g in groups if len(g) > 1)


# import cycles at the top level that remain (may only shrink)
TOP_LEVEL_CYCLES = [
    ["jitgrad.context", "jitgrad.errors", "jitgrad.graph", "jitgrad.shapes"],
    ["jitgrad.ops.array_ops", "jitgrad.ops.array_ops_dynamic"],   # one module in two files
]


def test_top_level_imports_go_one_way():
    modules = dict(_modules())
    # a package's __init__ is left out: importing any submodule runs it first, whoever imports what
    packages = {_module_name(p) for p in modules if p.endswith("__init__.py")}
    names = {_module_name(p) for p in modules}
    graph = {_module_name(p): {d for d in _top_level_imports(p, t) if d in names and d not in packages}
             for p, t in modules.items()}
    assert _cycles(graph) == TOP_LEVEL_CYCLES
