"""AutoGraph's source transformation: a function's AST rewritten so that its
control flow calls the run-time operators of operators.py (``ag__.if_stmt``,
``ag__.while_stmt``, ``ag__.for_stmt``, ``ag__.and_``, ...), as TF's converters
do. Passes, in order (each a small function over the function's AST):

  returns      ``return`` inside if/loop/with -> ``do_return``/``retval_`` flags
  break/continue                             -> ``break_N``/``continue_N`` flags
  expressions  ``and``/``or``/``not``/``x if c else y``/calls -> ag__ operators
  control flow ``if``/``while``/``for``       -> functional forms over get/set_state

Nested ``def``s are left as they are: calls to them go through
``ag__.converted_call``, which converts user functions when they are called.
Lambdas written in the function are converted with it (their body's expressions).
"""
import ast
import itertools

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_NOT_CONVERTED_CALLS = {"print", "super", "locals", "globals", "vars", "eval", "exec"}


class Unconvertible(Exception):
    """The function cannot be converted; it is called as it is."""


# ---------------------------------------------------------------- analysis
def _walk_scope(node):
    """``node`` and the nodes in it, not looking inside a nested function, lambda,
    class or comprehension (those are yielded, their insides are not)."""
    yield node
    if isinstance(node, _SCOPES + _COMPREHENSIONS):
        return
    todo = list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _SCOPES + _COMPREHENSIONS):
            todo.extend(ast.iter_child_nodes(n))


def composite_symbol(node):
    """``a.b.c`` or ``a['k']`` / ``a[0]`` (constant keys) as the text AutoGraph tracks
    it by (TF's composite symbols: an object's attributes and a fixed collection's
    items modified in a loop or branch become its state too), else None."""
    base = node
    while isinstance(base, (ast.Attribute, ast.Subscript)):
        if isinstance(base, ast.Subscript) and not isinstance(base.slice, ast.Constant):
            return None
        base = base.value
    if base is node or not isinstance(base, ast.Name):
        return None
    return ast.unparse(node)


def is_composite(symbol):
    return not symbol.isidentifier()


def assigned(stmts):
    """Names (and composite symbols) a block binds in its own scope."""
    out = set()
    for s in stmts:
        for n in _walk_scope(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Store):
                sym = composite_symbol(n)
                if sym is not None:
                    out.add(sym)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                out.add(n.name)
    return out


def reads(node):
    """Names a node reads, nested functions and lambdas included (conservative)."""
    nodes = node if isinstance(node, list) else [node]
    out = set()
    for top in nodes:
        for n in ast.walk(top):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, ast.Load):
                sym = composite_symbol(n)
                if sym is not None:
                    out.add(sym)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, (ast.Name, ast.Attribute, ast.Subscript)):
                sym = n.target.id if isinstance(n.target, ast.Name) else composite_symbol(n.target)
                if sym is not None:
                    out.add(sym)
    return out


def upward_exposed(stmts, done=None):
    """Names a block may read before it assigns them (its live-in, conservatively)."""
    exposed, done = set(), set(done or ())
    for s in stmts:
        if isinstance(s, ast.With):
            # its body runs straight through, as TF's control-flow graph has it: so a
            # name bound in it (a GradientTape's ``as t``, a value recorded under
            # it) and read after it in a loop body is not carried by the loop
            exposed |= reads([item.context_expr for item in s.items]) - done
            exposed |= upward_exposed(s.body, done | _with_targets(s))
        else:
            exposed |= reads(s) - done
        done |= _bound_by([s])
    return exposed


def _with_targets(s):
    """Names a with statement's ``as`` clauses bind."""
    return assigned([ast.Assign(targets=[item.optional_vars], value=ast.Constant(None))
                     for item in s.items if item.optional_vars is not None])


def _bound_by(stmts):
    """Names a block surely binds, as upward_exposed counts them: not what a loop or
    a try may skip, an if's only where both branches bind it."""
    done = set()
    for s in stmts:
        if isinstance(s, ast.If):
            done |= assigned(s.body) & assigned(s.orelse)
        elif isinstance(s, ast.With):
            done |= _with_targets(s) | _bound_by(s.body)
        elif not isinstance(s, (ast.While, ast.For, ast.Try)):
            done |= assigned([s])
    return done


def _contains(stmts, kinds, stop=()):
    """Whether a block has a node of ``kinds``, not looking into ``stop`` nodes or nested scopes."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, kinds):
            return True
        if isinstance(n, _SCOPES + _COMPREHENSIONS + stop):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


# ---------------------------------------------------------------- AST helpers
def _name(id_, store=False):
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _assign(id_, value):
    return ast.Assign(targets=[_name(id_, True)], value=value, lineno=0)


def _stmts(src):
    return ast.parse(src).body


def _expr(src):
    return ast.parse(src, mode="eval").body


def _not(id_):
    """``not flag`` as ``ag__.not_(flag)`` (the flag may become a tensor)."""
    return ast.Call(func=_expr("ag__.not_"), args=[_name(id_)], keywords=[])


def _and(*exprs):
    exprs = [e for e in exprs if e is not None]
    if not exprs:
        return None
    return exprs[0] if len(exprs) == 1 else ast.BoolOp(op=ast.And(), values=exprs)


def _guard(flag, stmts):
    return [ast.If(test=_not(flag), body=stmts, orelse=[])] if stmts else []


# ---------------------------------------------------------------- returns
def _lower_returns(fdef):
    """Returns below the top level become ``do_return = True; retval_ = value``;
    statements after one that may return run under ``if not do_return``; loops
    that may return stop on ``do_return`` (TF's return_statements converter)."""
    nested = any(_contains(s.body if hasattr(s, "body") else [], ast.Return) or
                 _contains(getattr(s, "orelse", []), ast.Return) or
                 _contains(getattr(s, "handlers", []), ast.Return) or
                 _contains(getattr(s, "finalbody", []), ast.Return)
                 for s in fdef.body if not isinstance(s, _SCOPES))
    if not nested:
        return
    body, _, _ = _return_block(fdef.body)
    fdef.body = ([_assign("do_return", ast.Constant(False)), _assign("retval_", _expr("ag__.UndefinedReturnValue()"))]
                 + body + [ast.Return(value=_expr("ag__.retval(retval_)"))])


def _return_block(stmts):
    """-> (statements, definitely returns, may return)."""
    out = []
    for i, s in enumerate(stmts):
        rest = stmts[i + 1:]
        if isinstance(s, ast.Return):
            out += [_assign("do_return", ast.Constant(True)), _assign("retval_", s.value or ast.Constant(None))]
            return out, True, True
        if isinstance(s, ast.If):
            body, b_def, b_may = _return_block(s.body)
            orelse, o_def, o_may = _return_block(s.orelse)
            if b_def and not o_def and rest:     # `if c: return a` then more: the rest is the else
                orelse, o_def, o_may = _return_block(s.orelse + rest)
                rest = []
            elif o_def and not b_def and rest:
                body, b_def, b_may = _return_block(s.body + rest)
                rest = []
            out.append(ast.If(test=s.test, body=body or [ast.Pass()], orelse=orelse))
            definitely, may = b_def and o_def, b_may or o_may
        elif isinstance(s, (ast.While, ast.For)):
            body, _, may = _return_block(s.body)
            s.body = body
            if may:
                _add_loop_test(s, _not("do_return"))
            out.append(s)
            definitely = False
        elif isinstance(s, (ast.With, ast.Try)):
            definitely = may = False
            for field in ("body", "orelse", "finalbody"):
                if getattr(s, field, None):
                    block, d, m = _return_block(getattr(s, field))
                    setattr(s, field, block)
                    definitely |= d and field == "body" and isinstance(s, ast.With)
                    may |= m
            for h in getattr(s, "handlers", []):
                h.body, _, m = _return_block(h.body)
                may |= m
            out.append(s)
        else:
            out.append(s)
            continue
        if definitely:
            return out, True, True
        if may and rest:
            body, _, _ = _return_block(rest)
            return out + _guard("do_return", body), False, True
        if may and not rest:
            return out, False, True
    return out, False, False


def _add_loop_test(loop, extra):
    """A condition the loop also stops on (``not break_``, ``not do_return``)."""
    if isinstance(loop, ast.While):
        loop.test = _and(extra, loop.test)
    else:
        loop.ag_extra_test = _and(extra, getattr(loop, "ag_extra_test", None))


# ---------------------------------------------------------------- break / continue
def _lower_jumps(stmts, counter):
    """break/continue of every loop in a block (innermost loops first) become flags."""
    for n in stmts:
        for c in _walk_scope(n):
            if isinstance(c, (ast.While, ast.For)):
                _lower_loop_jumps(c, counter)


def _lower_loop_jumps(loop, counter):
    if getattr(loop, "ag_jumps_done", False):
        return
    loop.ag_jumps_done = True
    for s in loop.body:   # inner loops first: their jumps are theirs
        _lower_jumps([s], counter)
    if _contains(loop.body, ast.Continue, stop=(ast.While, ast.For)):
        flag = f"continue_{next(counter)}"
        body, _ = _jump_block(loop.body, ast.Continue, flag)
        loop.body = [_assign(flag, ast.Constant(False))] + body
    if _contains(loop.body, ast.Break, stop=(ast.While, ast.For)):
        flag = f"break_{next(counter)}"
        loop.body, _ = _jump_block(loop.body, ast.Break, flag)
        _add_loop_test(loop, _not(flag))
        loop.ag_break_flag = flag


def _jump_block(stmts, kind, flag):
    """-> (statements, may jump): ``kind`` becomes ``flag = True``, what follows a
    statement that may jump runs under ``if not flag``."""
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, kind):
            return out + [_assign(flag, ast.Constant(True))], True
        may = False
        if not isinstance(s, (ast.While, ast.For) + _SCOPES):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(s, field, None)
                if block and _contains(block, kind, stop=(ast.While, ast.For)):
                    new, m = _jump_block(block, kind, flag)
                    setattr(s, field, new)
                    may |= m
            for h in getattr(s, "handlers", []):
                if _contains(h.body, kind, stop=(ast.While, ast.For)):
                    h.body, m = _jump_block(h.body, kind, flag)
                    may |= m
        out.append(s)
        if may and stmts[i + 1:]:
            rest, _ = _jump_block(stmts[i + 1:], kind, flag)
            return out + _guard(flag, rest), True
    return out, False


# ---------------------------------------------------------------- expressions
class _Expressions(ast.NodeTransformer):
    """and/or/not, conditional expressions and calls -> ag__ operators."""

    def visit_FunctionDef(self, node):
        return node   # nested functions are converted when called

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node):
        """A lambda's body is an expression of this function's source: converted in
        place (TF converts lambdas too; a ``def`` is converted when it is called)."""
        self.generic_visit(node)
        return node

    def visit_For(self, node):
        self.generic_visit(node)
        if getattr(node, "ag_extra_test", None) is not None:
            node.ag_extra_test = self.visit(node.ag_extra_test)
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for v in reversed(node.values[:-1]):
            result = ast.Call(func=_expr(f"ag__.{fn}"), args=[_thunk(v), _thunk(result)], keywords=[])
        return result

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.Call(func=_expr("ag__.not_"), args=[node.operand], keywords=[])
        return node

    def visit_IfExp(self, node):
        text = ast.unparse(node)
        self.generic_visit(node)
        return ast.Call(func=_expr("ag__.if_exp"), args=[node.test, _thunk(node.body), _thunk(node.orelse),
                                                         ast.Constant(text)], keywords=[])

    def visit_Assert(self, node):
        """``assert test, "msg"`` -> ``ag__.assert_stmt(test, lambda: "msg")`` (autograph/asserts.py);
        as TF, only a string message (or none) is converted: other asserts stay Python's."""
        self.generic_visit(node)
        if node.msg is not None and not (isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str)):
            return node
        msg = node.msg if node.msg is not None else ast.Constant(None)
        call = ast.Call(func=_expr("ag__.assert_stmt"), args=[node.test, _thunk(msg)], keywords=[])
        return ast.copy_location(ast.Expr(call), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and (f.id in _NOT_CONVERTED_CALLS or f.id == "ag__"):
            return node
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "ag__":
            return node
        node.func = ast.Call(func=_expr("ag__.converted_call"), args=[f], keywords=[])
        return node


def _thunk(e):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                      body=e)


# ---------------------------------------------------------------- control flow
class _ControlFlow:
    """if/while/for -> functional forms. ``defined``: names that may have a value
    when a statement runs (else an ``ag__.Undefined`` is stored first so that
    ``nonlocal`` finds a binding); ``live``: names possibly read afterwards."""

    def __init__(self, global_names):
        self.globals = global_names
        self.counter = itertools.count()
        self.undefined = set()    # names that may hold an ag__.Undefined: loaded through ag__.ld

    def block(self, stmts, defined, live_out):
        out = []
        defined = set(defined)
        after = [set() for _ in stmts]
        acc = set(live_out)
        for i in range(len(stmts) - 1, -1, -1):
            after[i] = set(acc)
            acc |= reads(stmts[i])
        for s, live in zip(stmts, after):
            if isinstance(s, ast.If):
                out += self.if_stmt(s, defined, live)
            elif isinstance(s, (ast.While, ast.For)):
                flag = getattr(s, "ag_break_flag", None)
                if flag:   # break_N = False before the loop
                    out.append(_assign(flag, ast.Constant(False)))
                    defined.add(flag)
                out += (self.while_stmt if isinstance(s, ast.While) else self.for_stmt)(s, defined, live)
            else:
                # a with block runs straight through: what is live after it is live after
                # its body; a try's blocks may be left midway, to a handler reading anything
                inner_live = live if isinstance(s, ast.With) else live | reads(stmts)
                for field in ("body", "orelse", "finalbody"):   # with / try: their blocks, in place
                    if not isinstance(s, _SCOPES) and isinstance(getattr(s, field, None), list):
                        setattr(s, field, self.block(getattr(s, field), defined, inner_live))
                for h in getattr(s, "handlers", []):
                    h.body = self.block(h.body, defined, live | reads(stmts))
                out.append(s)
            defined |= assigned([s])
        return out

    def _undefined_inits(self, names, defined):
        names = {n for n in names if not is_composite(n)}   # an attribute/item has no binding to make
        self.undefined |= names - defined
        return [_assign(n, _expr(f"ag__.Undefined({n!r})")) for n in sorted(names - defined)]

    def _state_fns(self, k, names):
        names = list(names)
        tup = "(" + "".join(f"ag__.ldu(lambda: {n}, {n!r}), " for n in names) + ")"
        src = f"def get_state_{k}():\n    return {tup}\n"
        plain = [n for n in names if not is_composite(n)]
        if names:
            src += (f"def set_state_{k}(vars_):\n" + (f"    nonlocal {', '.join(plain)}\n" if plain else "") +
                    f"    ({', '.join(names)},) = vars_\n")
        else:
            src += f"def set_state_{k}(vars_):\n    pass\n"
        return _stmts(src)

    def _fn(self, name, args, modified, body):
        fn = _stmts(f"def {name}({args}):\n    pass\n")[0]
        decl = []
        local = sorted(n for n in modified - self.globals if not is_composite(n))
        if local:
            decl.append(ast.Nonlocal(names=local))
        glob = sorted(modified & self.globals)
        if glob:
            decl.append(ast.Global(names=glob))
        fn.body = decl + (body or [ast.Pass()])
        return fn

    def if_stmt(self, s, defined, live):
        k = next(self.counter)
        modified = assigned(s.body) | assigned(s.orelse)
        outs = sorted(modified & live)
        names = outs + sorted(modified - set(outs))
        inner = defined | modified
        body = self.block(s.body, inner, live)
        orelse = self.block(s.orelse, inner, live)
        call = ast.Expr(value=ast.Call(func=_expr("ag__.if_stmt"), args=[
            s.test, _name(f"if_body_{k}"), _name(f"else_body_{k}"), _name(f"get_state_{k}"),
            _name(f"set_state_{k}"), _expr(repr(tuple(names))), ast.Constant(len(outs))], keywords=[]))
        return (self._undefined_inits(modified - self.globals, defined) + self._state_fns(k, names) +
                [self._fn(f"if_body_{k}", "", modified, body), self._fn(f"else_body_{k}", "", modified, orelse), call])

    def _loop_opts(self, s):
        """tf.autograph.experimental.set_loop_options(...) at the top of the body: the loop's options."""
        keep, opts = [], None
        for st in s.body:
            c = st.value if isinstance(st, ast.Expr) else None
            f = c.func if isinstance(c, ast.Call) else None
            if isinstance(f, ast.Call) and ast.unparse(f.func) == "ag__.converted_call":
                f = f.args[0]      # the expression pass wrapped the callee
            if getattr(f, "attr", None) == "set_loop_options" or getattr(f, "id", None) == "set_loop_options":
                opts = ast.Call(func=_name("dict"), args=[], keywords=c.keywords)
                continue
            keep.append(st)
        s.body = keep
        return opts or ast.Dict(keys=[], values=[])

    def _loop_vars(self, s, modified, live, test_reads):
        return sorted(modified & (live | test_reads | upward_exposed(s.body)) - self.globals)

    def _after_loop(self, s, defined, live):
        if not s.orelse:
            return []
        flag = getattr(s, "ag_break_flag", None)
        orelse = _guard(flag, s.orelse) if flag else s.orelse
        return self.block(orelse, defined, live)

    def while_stmt(self, s, defined, live):
        k = next(self.counter)
        opts = self._loop_opts(s)
        modified = assigned(s.body)
        test_reads = reads(s.test)
        loop_vars = self._loop_vars(s, modified, live, test_reads)
        inner = defined | modified
        body = self.block(s.body, inner, live | test_reads | upward_exposed(s.body) | reads(s.body))
        test_fn = _stmts(f"def loop_test_{k}():\n    return None\n")[0]
        test_fn.body[0].value = s.test
        call = ast.Expr(value=ast.Call(func=_expr("ag__.while_stmt"), args=[
            _name(f"loop_test_{k}"), _name(f"loop_body_{k}"), _name(f"get_state_{k}"), _name(f"set_state_{k}"),
            _expr(repr(tuple(loop_vars))), opts], keywords=[]))
        return (self._undefined_inits(modified - self.globals, defined) + self._state_fns(k, loop_vars) +
                [self._fn(f"loop_body_{k}", "", modified, body), test_fn, call] +
                self._after_loop(s, defined | modified, live))

    def for_stmt(self, s, defined, live):
        k = next(self.counter)
        opts = self._loop_opts(s)
        s.body = [ast.Assign(targets=[s.target], value=_name(f"itr_{k}"), lineno=0)] + s.body
        modified = assigned(s.body)
        extra = getattr(s, "ag_extra_test", None)
        test_reads = reads(extra) if extra is not None else set()
        loop_vars = self._loop_vars(s, modified, live, test_reads)
        inner = defined | modified
        body = self.block(s.body, inner, live | test_reads | upward_exposed(s.body) | reads(s.body))
        stmts = self._undefined_inits(modified - self.globals, defined) + self._state_fns(k, loop_vars)
        stmts.append(self._fn(f"loop_body_{k}", f"itr_{k}", modified, body))
        if extra is not None:
            test_fn = _stmts(f"def extra_test_{k}():\n    return None\n")[0]
            test_fn.body[0].value = extra
            stmts.append(test_fn)
        stmts.append(ast.Expr(value=ast.Call(func=_expr("ag__.for_stmt"), args=[
            s.iter, _name(f"extra_test_{k}") if extra is not None else ast.Constant(None), _name(f"loop_body_{k}"),
            _name(f"get_state_{k}"), _name(f"set_state_{k}"), _expr(repr(tuple(loop_vars))), opts], keywords=[])))
        return stmts + self._after_loop(s, defined | modified, live)


class _CheckedLoads(ast.NodeTransformer):
    """Loads of names that may be ag__.Undefined go through ``ag__.ld``, which
    raises Python's UnboundLocalError for them (as TF)."""

    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.names:
            return ast.Call(func=_expr("ag__.ld"), args=[node], keywords=[])
        return node


# ---------------------------------------------------------------- the whole function
def _arg_names(args):
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return set(names)


def transform(fdef):
    """Rewrites a parsed ``def`` in place; returns it (named ``tf__<name>`` as TF does)."""
    if not isinstance(fdef, ast.FunctionDef):
        raise Unconvertible("only functions defined with `def` are converted")
    if _contains(fdef.body, (ast.Yield, ast.YieldFrom, ast.Await)):
        raise Unconvertible("generators are not converted")
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super" and not n.args
           for n in _walk_scope(fdef)):
        raise Unconvertible("zero-argument super() needs the class cell")
    fdef.decorator_list = []
    fdef.returns = None
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs:
        a.annotation = None
    global_names = set()
    for n in _walk_scope(fdef):
        if isinstance(n, ast.Global):
            global_names.update(n.names)
    _lower_returns(fdef)
    _lower_jumps(fdef.body, itertools.count())
    fdef.body = [_Expressions().visit(s) for s in fdef.body]
    control_flow = _ControlFlow(global_names)
    fdef.body = control_flow.block(fdef.body, _arg_names(fdef.args), set())
    fdef.body = [_CheckedLoads(control_flow.undefined).visit(s) for s in fdef.body]
    fdef.name = "tf__" + fdef.name
    return fdef
