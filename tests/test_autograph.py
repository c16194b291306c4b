"""AutoGraph: Python control flow on tensors inside jitgrad.function becomes
If / While ops (jitgrad/autograph/). Expected values are computed in plain
Python / numpy; each staged example also checks that the traced graph holds
If / While ops (not an unrolled loop) and that the run compiled (no fallback)."""
import io
import contextlib

import numpy as np
import pytest

import jitgrad as tf


def _op_types(fn, *args):
    """Op types of the traced graph, the branches and loop bodies of its If/While ops included."""
    types_, todo = set(), [fn.get_concrete_function(*args).graph]
    while todo:
        for op in todo.pop().get_operations():
            types_.add(op.type)
            for v in op.attrs.values():
                for f in (v if isinstance(v, (list, tuple)) else [v]):
                    if hasattr(f, "graph") and hasattr(f.graph, "get_operations"):
                        todo.append(f.graph)
    return types_


def _run_compiled(fn, *args):
    before = tf.cache_info()["fallbacks"]
    out = fn(*args)
    assert tf.cache_info()["fallbacks"] == before, "a run fell back to the interpreter"
    return out


def _collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@tf.function
def collatz(n):
    steps = tf.constant(0)
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@pytest.mark.parametrize("n", [1, 6, 7, 27])
def test_collatz_while_with_tensor_condition(n):
    assert int(_run_compiled(collatz, tf.constant(n))) == _collatz_steps(n)
    assert {"While", "If"} <= _op_types(collatz, tf.constant(n))


@tf.function
def sum_even_squares(n):
    s = 0
    for i in tf.range(n):
        if i % 2 == 0:
            s += i * i
    return s


def test_for_over_range_of_runtime_length():
    for n in (0, 1, 10, 13):
        assert int(_run_compiled(sum_even_squares, tf.constant(n))) == sum(i * i for i in range(n) if i % 2 == 0)
    types_ = _op_types(sum_even_squares, tf.constant(10))
    assert "While" in types_ and "If" in types_


@tf.function
def fizzbuzz_codes(n):
    # 15 -> 3, 3 -> 1, 5 -> 2, else 0: an if/elif chain on tensors, summed
    total = tf.constant(0)
    for i in tf.range(1, n + 1):
        if i % 15 == 0:
            code = 3
        elif i % 3 == 0:
            code = 1
        elif i % 5 == 0:
            code = 2
        else:
            code = 0
        total = total * 4 % 1000003 + code
    return total


def test_if_elif_chain():
    def ref(n):
        total = 0
        for i in range(1, n + 1):
            code = 3 if i % 15 == 0 else 1 if i % 3 == 0 else 2 if i % 5 == 0 else 0
            total = total * 4 % 1000003 + code
        return total
    for n in (1, 5, 15, 31):
        assert int(_run_compiled(fizzbuzz_codes, tf.constant(n))) == ref(n)


@tf.function
def sum_until_negative_skipping_big(x):
    s = tf.constant(0.)
    for v in x:
        if v < 0:
            break
        if v > 5:
            continue
        s += v
    return s


def test_break_and_continue_over_tensor_rows():
    def ref(xs):
        s = 0.
        for v in xs:
            if v < 0:
                break
            if v > 5:
                continue
            s += v
        return s
    for xs in ([1., 7., 2., -1., 4.], [3., 3., 9.], [-2., 1.]):
        got = _run_compiled(sum_until_negative_skipping_big, tf.constant(np.array(xs, np.float32)))
        assert float(got) == ref(xs)
    assert "While" in _op_types(sum_until_negative_skipping_big, tf.constant([1., 2.]))


@tf.function
def first_big(x, limit):
    found = tf.constant(-1.)
    i = 0
    while i < tf.shape(x)[0]:
        v = tf.gather(x, i)     # (jitgrad's x[i] needs an index known when tracing)
        if v > limit:
            found = v
            break
        i += 1
    return found


def test_break_in_while():
    assert float(first_big(tf.constant([1., 3., 5.]), tf.constant(2.))) == 3.
    assert float(first_big(tf.constant([1., 0.]), tf.constant(2.))) == -1.


@tf.function
def abs_or_double(x):
    if x > 0:
        return x * 2
    return -x


def test_early_return_under_tensor_condition():
    assert float(_run_compiled(abs_or_double, tf.constant(3.))) == 6.
    assert float(abs_or_double(tf.constant(-4.))) == 4.
    assert "If" in _op_types(abs_or_double, tf.constant(1.))


@tf.function
def first_over_python_loop(x, thresholds):
    for t in thresholds:          # a Python list: a Python loop, unrolled as TF does
        if t > 10:
            return x * t
    return x


def test_early_return_in_python_loop():
    assert float(first_over_python_loop(tf.constant(2.), [1, 20, 30])) == 40.
    assert float(first_over_python_loop(tf.constant(2.), [1, 2])) == 2.


def test_return_inside_tensor_loop_is_tf_not_implemented_error():
    @tf.function
    def f(x):
        for v in x:
            if v > 2:
                return v
        return tf.constant(-1.)
    with pytest.raises(NotImplementedError, match="a return statement cannot be placed inside this TensorFlow loop"):
        f(tf.constant([1., 3.]))


def test_python_conditions_stay_python():
    @tf.function
    def f(x, mode):
        if mode == "double":      # a Python value: no op
            x = x * 2
        else:
            x = x + 1
        k = 0
        while k < 3:              # a Python loop
            x = x + 1
            k += 1
        return x
    assert float(f(tf.constant(1.), "double")) == 5.
    assert float(f(tf.constant(1.), "inc")) == 5.
    types_ = _op_types(f, tf.constant(1.), "double")
    assert "If" not in types_ and "While" not in types_


def test_boolean_operators_and_conditional_expression():
    @tf.function
    def f(x, y):
        both = x > 0 and y > 0
        either = x > 0 or y > 0
        neither = not either
        z = x if x > y else y
        return both, either, neither, z
    for a, b in [(1., 2.), (-1., 2.), (-1., -3.), (3., -1.)]:
        both, either, neither, z = f(tf.constant(a), tf.constant(b))
        assert bool(both) == (a > 0 and b > 0)
        assert bool(either) == (a > 0 or b > 0)
        assert bool(neither) == (not (a > 0 or b > 0))
        assert float(z) == max(a, b)


def _helper_step(v):
    if v > 1.:
        v = v / 2.
    else:
        v = v * 3.
    return v


def test_called_user_functions_are_converted():
    scale = tf.constant(2.)

    def closure_loop(x):      # a closure: its cells are the converted function's
        while x < 100.:
            x = x * scale
        return x

    @tf.function
    def f(x):
        return closure_loop(_helper_step(x))
    assert float(f(tf.constant(4.))) == 128.    # 4 -> 2 -> 4, 8, ..., 128
    assert float(f(tf.constant(0.5))) == 192.   # 0.5 -> 1.5 -> 3, 6, ..., 192


def test_gradient_through_converted_loop():
    @tf.function
    def power(x, n):
        y = tf.ones_like(x)
        for _ in tf.range(n):
            y = y * x
        return y

    @tf.function
    def grad(x, n):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = power(x, n)
        return tape.gradient(y, x)
    x = np.array([1.5, -2., 0.5], np.float32)
    got = _run_compiled(grad, tf.constant(x), tf.constant(3))
    np.testing.assert_allclose(got.numpy(), 3 * x ** 2, rtol=1e-6)
    assert "While" in _op_types(power, tf.constant(x), tf.constant(3))


def test_variable_defined_in_one_branch_is_tf_error():
    @tf.function
    def f(x):
        if x > 0:
            y = x
        return y
    with pytest.raises(ValueError, match="'y' must also be initialized in the else branch"):
        f(tf.constant(1.))


def test_dtype_mismatch_between_branches():
    @tf.function
    def f(x):
        if x > 0:
            y = tf.constant(1)
        else:
            y = tf.constant(1.)
        return y
    with pytest.raises(TypeError, match="'y' has dtype int32 in the main branch, but dtype float32 in the else"):
        f(tf.constant(1.))


def test_variable_first_defined_in_loop_is_initialised_as_tf():
    @tf.function
    def f(x):
        while x < 10:
            x += 1
            z = x * 2
        return z
    assert float(f(tf.constant(1.))) == 20.   # TF 2.21 gives 20.0 too


def test_loop_var_changing_dtype_is_tf_error():
    @tf.function
    def f(n):
        s = 0
        for i in tf.range(n):
            s = tf.cast(i, tf.float32)
        return s
    with pytest.raises(TypeError, match="'s' has dtype int32 before the loop, but dtype float32 after one iteration"):
        f(tf.constant(3))


def test_non_bool_tensor_condition_is_tf_error():
    @tf.function
    def f(x):
        if x:
            x = x + 1
        return x
    with pytest.raises(ValueError, match="condition of if statement expected to be `tf.bool` scalar"):
        f(tf.constant(1.))


def test_autograph_false_raises_tf_error_on_tensor_bool():
    @tf.function(autograph=False)
    def f(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(TypeError, match="symbolic"):
        f(tf.constant(1.))


def test_do_not_convert():
    @tf.autograph.experimental.do_not_convert
    def plain(x):
        if x > 0:
            return x
        return -x

    @tf.function
    def f(x):
        return plain(x)
    with pytest.raises(TypeError, match="symbolic"):
        f(tf.constant(1.))


def test_to_code_returns_converted_source():
    code = tf.autograph.to_code(collatz)
    assert code.startswith("def tf__collatz(n):")
    assert "ag__.while_stmt" in code and "ag__.if_stmt" in code
    assert tf.autograph.to_code(collatz.python_function) == code


def test_set_loop_options_accepted():
    @tf.function
    def f(n):
        s = tf.constant(0)
        i = tf.constant(0)
        while i < n:
            tf.autograph.experimental.set_loop_options(maximum_iterations=4)
            s += i
            i += 1
        return s
    assert int(f(tf.constant(10))) == 0 + 1 + 2 + 3   # stopped after 4 iterations, as TF


def test_print_stays_python_print_at_trace_time():
    # TF's tf.function does not convert print (BUILTIN_FUNCTIONS is off by default):
    # it prints once, when tracing
    @tf.function
    def f(x):
        print("tracing")
        return x + 1
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        f(tf.constant(1.))
        f(tf.constant(2.))
    assert buf.getvalue() == "tracing\n"


def test_conversion_is_cached():
    from jitgrad.autograph import conversion
    conv = conversion.convert(_helper_step)
    assert conversion.convert(_helper_step) is conv


def test_tf_print_in_a_staged_branch_prints_when_the_branch_runs(capsys):
    import sys

    @tf.function
    def f(x):
        if x > 0:
            tf.print("positive", x, output_stream=sys.stdout)
        return x
    f(tf.constant(1.))
    f(tf.constant(-1.))
    f(tf.constant(2.))
    assert capsys.readouterr().out == "positive 1\npositive 2\n"


def test_tf_print_under_python_condition_prints_each_call(capsys):
    import sys

    @tf.function
    def f(x, verbose):
        if verbose:               # Python: no cond; the print op runs on every call
            tf.print("x =", x, output_stream=sys.stdout)
        return x * 2
    f(tf.constant(1.), True)
    f(tf.constant(2.), True)
    assert float(f(tf.constant(3.), False)) == 6.
    assert capsys.readouterr().out == "x = 1\nx = 2\n"


@pytest.mark.parametrize("make_args", [
    lambda: (collatz, tf.constant(27)),
    lambda: (sum_even_squares, tf.constant(11)),
    lambda: (fizzbuzz_codes, tf.constant(31)),
    lambda: (sum_until_negative_skipping_big, tf.constant([1., 7., 2.5, -1., 4.])),
    lambda: (first_big, tf.constant([1., 3., 5.]), tf.constant(2.)),
    lambda: (abs_or_double, tf.constant(-4.5)),
])
def test_compiled_matches_reference_interpreter(make_args):
    fn, *args = make_args()
    results = {}
    for mode in ("interpret", "compiled"):
        tf.set_default_mode(mode)
        fresh = tf.function(fn.python_function)     # a new trace (and Session) in this mode
        results[mode] = fresh(*args).numpy()
    np.testing.assert_array_equal(results["compiled"], results["interpret"])
    assert results["compiled"].dtype == results["interpret"].dtype


def test_range_and_len_of_tensors_become_tf_ops():
    @tf.function
    def f(x):
        s = tf.constant(0.)
        for i in range(len(x)):          # len of a tensor, range of a tensor -> tf.range
            s += tf.gather(x, i) * tf.cast(i, tf.float32)
        return s
    x = np.array([1., 2., 3., 4.], np.float32)
    assert float(f(tf.constant(x))) == float(np.dot(x, np.arange(4)))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def g(x):
        s = tf.constant(0.)
        for i in range(len(x)):          # length known only at run time: a While
            s += tf.gather(x, i)
        return s
    assert float(g(tf.constant(x))) == 10.
    assert "While" in _op_types(g)


def test_loop_variable_read_before_defined_is_tf_error():
    @tf.function
    def f(x):
        while x < 10:
            y = y + 1
            x += 1
        return x
    with pytest.raises((ValueError, UnboundLocalError), match="'y'"):
        f(tf.constant(1.))


def test_python_loop_over_list_of_tensors_is_unrolled():
    @tf.function
    def f(xs):
        total = tf.constant(0.)
        for x in xs:
            if x > 1.:                   # a tensor condition inside a Python loop
                total += x
        return total
    assert float(f([tf.constant(0.5), tf.constant(2.), tf.constant(3.)])) == 5.


def test_nested_function_and_method_are_converted():
    class Clip(tf.Module):
        def __init__(self, limit):
            super().__init__()
            self.limit = limit

        @tf.function
        def __call__(self, x):
            def clip(v):
                if v > self.limit:
                    v = self.limit
                return v
            return clip(x) + self._bonus(x)

        def _bonus(self, x):
            return 1. if x < 0 else 0.
    m = Clip(tf.constant(2.))
    assert float(m(tf.constant(5.))) == 2.
    assert float(m(tf.constant(1.5))) == 1.5
    assert float(m(tf.constant(-3.))) == -2.


def test_while_with_else_and_break():
    @tf.function
    def f(n):
        i = tf.constant(0)
        found = tf.constant(False)
        while i < n:
            if i * i > 20:
                break
            i += 1
        else:
            found = tf.constant(True)    # runs only when the loop did not break
        return i, found
    i, found = f(tf.constant(3))
    assert int(i) == 3 and bool(found)
    i, found = f(tf.constant(10))
    assert int(i) == 5 and not bool(found)


def test_name_left_undefined_by_python_branch_is_unbound_local_error():
    @tf.function
    def f(x, flag):
        if flag:                  # Python condition, not taken: y never assigned
            y = x
        return y
    assert float(f(tf.constant(2.), True)) == 2.
    with pytest.raises(UnboundLocalError, match="'y' is used before assignment"):
        f(tf.constant(2.), False)


def test_set_loop_options_shape_invariants():
    @tf.function
    def f(n):
        v = tf.zeros([0])
        i = tf.constant(0)
        while i < n:
            tf.autograph.experimental.set_loop_options(shape_invariants=[(v, tf.TensorShape([None]))])
            v = tf.concat([v, [tf.cast(i, tf.float32)]], 0)
            i += 1
        return v
    np.testing.assert_array_equal(f(tf.constant(4)).numpy(), np.arange(4, dtype=np.float32))


def test_shape_change_without_invariant_is_tf_error():
    @tf.function
    def f(n):
        v = tf.zeros([0])
        i = tf.constant(0)
        while i < n:
            v = tf.concat([v, [1.]], 0)
            i += 1
        return v
    with pytest.raises(ValueError, match=r"'v' has shape \(0,\) before the loop, but shape \(1,\) after one"):
        f(tf.constant(3))


def test_return_in_one_tensor_branch_only_is_tf_error():
    @tf.function
    def f(x):
        if x > 0:
            return x
        x = x * 2                  # code after: TF makes it the else branch, which does not return
    with pytest.raises(ValueError, match="the else branch must also have a return statement"):
        f(tf.constant(1.))
