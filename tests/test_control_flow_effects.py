"""Side effects inside staged control flow: variables assigned in tf.cond
branches and tf.while_loop bodies (graph mode, jitgrad.function, AutoGraph),
tf.print inside them, and tf.case(exclusive=True). Every test runs in both
Session modes (tests/conftest.py's graph_mode); variable assignment compiles
natively (no interpreter fallback), checked by the ``no_fallback`` fixture.
Expected values are hand-computed or come from a plain numpy/Python loop."""
import sys

import numpy as np
import pytest

import jitgrad as tf
from jitgrad.errors import InvalidArgumentError

pytestmark = pytest.mark.usefixtures("graph_mode")

ph = tf.compat.v1.placeholder


def _session(g):
    with g.as_default():
        init = tf.compat.v1.global_variables_initializer()
    sess = tf.compat.v1.Session(graph=g)
    sess.run(init)
    return sess


# ---------------------------------------------------------------- graph mode (Session.run)
# A plain graph's branch / loop body runs only the assignments its outputs use, by data or by
# tf.control_dependencies (TF adds automatic control dependencies only in a tf.function): an
# unused assignment does not happen, and a read not ordered after one sees the value the
# region was entered with (legacy_region_writes.py). The values here are TF 2.21's.
cd = tf.control_dependencies


def test_cond_assigns_only_on_the_taken_branch_and_only_if_used(no_fallback):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0)
        p = ph(tf.bool, [])
        # true: v += 2, the result is the new value; false: v = v * 10 - 1, its result unused
        c = tf.cond(p, lambda: v.assign_add(2.0) * 10.0, lambda: (v * 100.0, v.assign(v * 10.0 - 1.0))[0])
        used = tf.cond(p, lambda: v.assign_add(2.0) * 10.0, lambda: v.assign(v * 10.0 - 1.0) * 0.0 + 5.0)
    sess = _session(g)
    assert sess.run(c, {p: True}) == 30.0 and sess.run(v) == 3.0
    assert sess.run(c, {p: False}) == 300.0 and sess.run(v) == 3.0      # (the assignment is not run)
    assert sess.run(c, {p: True}) == 50.0 and sess.run(v) == 5.0
    sess.run(v.initializer)
    assert sess.run(used, {p: False}) == 5.0 and sess.run(v) == 9.0
    assert sess.run(used, {p: True}) == 110.0 and sess.run(v) == 11.0


def test_reads_ordered_after_assignments_in_a_branch_see_the_new_value(no_fallback):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        x = ph(tf.float32, [2])

        def ordered():
            before = v * 1.0
            with cd([before]):
                a = v.assign(v * 3.0)
            with cd([a]):
                mid = v + 0.0
            with cd([mid]):
                b = v.assign_sub(x)
            with cd([b]):
                return before, mid, v.read_value()

        def unordered():      # the same without the dependencies: nothing is assigned
            before = v * 1.0
            v.assign(v * 3.0)
            mid = v + 0.0
            v.assign_sub(x)
            return before, mid, v.read_value()
        out = tf.cond(tf.reduce_sum(x) > 0, ordered, lambda: (v * 1.0, v * 1.0, v * 1.0))
        plain = tf.cond(tf.reduce_sum(x) > 0, unordered, lambda: (v * 1.0, v * 1.0, v * 1.0))
    sess = _session(g)
    for got in sess.run(plain, {x: [0.5, 1.0]}):
        np.testing.assert_array_equal(got, [1.0, 2.0])
    np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
    a, b, c = sess.run(out, {x: [0.5, 1.0]})
    np.testing.assert_array_equal(a, [1.0, 2.0])
    np.testing.assert_array_equal(b, [3.0, 6.0])
    np.testing.assert_array_equal(c, [2.5, 5.0])
    np.testing.assert_array_equal(sess.run(v), [2.5, 5.0])
    sess.run(out, {x: [-1.0, 0.0]})      # the false branch assigns nothing
    np.testing.assert_array_equal(sess.run(v), [2.5, 5.0])


def test_while_body_assigns_on_every_iteration_in_order(no_fallback):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(0.0)
        u = tf.Variable(5.0)          # only read in the body
        n = ph(tf.int32, [])

        def body(i, acc):
            before = w * 1.0
            with cd([before]):
                a = w.assign_add(tf.cast(i, tf.float32))
            with cd([a]):
                return i + 1, acc + w * u - before

        def unused(i, acc):       # an assignment the outputs do not use: never run
            w.assign_add(tf.cast(i, tf.float32))
            return i + 1, acc + w * u
        # (parallel_iterations=1: TF's iterations otherwise overlap, and its reads race)
        out = tf.while_loop(lambda i, acc: i < n, body, [0, 0.0], parallel_iterations=1)
        plain = tf.while_loop(lambda i, acc: i < n, unused, [0, 0.0])
    sess = _session(g)
    for trips in (0, 1, 4, 7):
        sess.run(w.initializer)
        # the same loop in Python
        wv, acc = 0.0, 0.0
        for i in range(trips):
            before = wv
            wv += i
            acc += wv * 5.0 - before
        got = sess.run(out, {n: trips})
        assert got[0] == trips and got[1] == pytest.approx(acc, rel=1e-6)
        assert sess.run(w) == pytest.approx(wv)
        assert sess.run(plain, {n: trips}) == [trips, wv * 5.0 * trips] and sess.run(w) == pytest.approx(wv)


def test_nested_cond_in_loop_and_loop_in_cond_assign(no_fallback):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(0)
        n = ph(tf.int32, [])
        p = ph(tf.bool, [])

        def body(i):
            # even i: v += i; odd i: v *= 2 -- a cond assigning inside a loop body
            c = tf.cond(tf.equal(i % 2, 0), lambda: v.assign_add(i), lambda: v.assign(v * 2))
            with cd([c]):
                return i + 1

        def loop():     # a loop inside a branch
            i = tf.while_loop(lambda i: i < n, body, [0])[0]
            with cd([i]):
                return i + v * 0

        def unused_loop():     # its cond's result unused: the loop assigns nothing
            return tf.while_loop(lambda i: i < n, lambda i: (tf.cond(i > 0, lambda: v.assign(i), lambda: v * 1),
                                                              i + 1)[1], [0])[0]

        out = tf.cond(p, loop, lambda: v.assign(-1))
        plain = tf.cond(p, unused_loop, lambda: v * 1)
    sess = _session(g)
    vv = 0
    for i in range(6):
        vv = vv + i if i % 2 == 0 else vv * 2
    assert sess.run(out, {n: 6, p: True}) == 6
    assert sess.run(v) == vv
    assert sess.run(plain, {n: 6, p: True}) == 6 and sess.run(v) == vv
    assert sess.run(out, {n: 6, p: False}) == -1 and sess.run(v) == -1


def test_training_loop_in_one_graph_matches_numpy_gradient_descent(no_fallback):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((16, 3)).astype(np.float32)
    y = (X @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    lr, steps = 0.1, 25
    g = tf.Graph()
    with g.as_default():
        W = tf.Variable(np.zeros((3, 1), np.float32))
        b = tf.Variable(0.0)
        xs, ys = ph(tf.float32, [16, 3]), ph(tf.float32, [16, 1])
        opt = tf.compat.v1.train.GradientDescentOptimizer(lr)

        def body(i, last):
            loss = tf.reduce_mean(tf.square(tf.matmul(xs, W) + b - ys))
            step = opt.minimize(loss, var_list=[W, b])
            with tf.control_dependencies([step]):
                return i + 1, loss
        out = tf.while_loop(lambda i, last: i < steps, body, [0, 0.0])
    sess = _session(g)
    _, last_loss = sess.run(out, {xs: X, ys: y})
    # the same steps in numpy (gradients of the mean squared error by hand)
    Wn, bn = np.zeros((3, 1), np.float64), 0.0
    for _ in range(steps):
        r = X @ Wn + bn - y
        loss = np.mean(r * r)
        gW, gb = 2 * X.T @ r / len(X), 2 * r.mean()
        Wn, bn = Wn - lr * gW, bn - lr * gb
    assert last_loss == pytest.approx(loss, rel=1e-4)
    np.testing.assert_allclose(sess.run(W), Wn, rtol=1e-4, atol=1e-6)
    assert sess.run(b) == pytest.approx(bn, rel=1e-4)


def test_momentum_optimizer_in_a_loop_creates_its_slots_outside_and_matches_numpy(no_fallback):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((12, 3)).astype(np.float32)
    y = (X @ np.array([[1.0], [-2.0], [0.5]], np.float32)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        W = tf.Variable(np.zeros((3, 1), np.float32))
        opt = tf.compat.v1.train.MomentumOptimizer(0.05, 0.9)

        def body(i, last):
            loss = tf.reduce_mean(tf.square(tf.matmul(X, W) - y))
            with tf.control_dependencies([opt.minimize(loss, var_list=[W])]):
                return i + 1, loss
        out = tf.while_loop(lambda i, last: i < 20, body, [0, 0.0])
        assert len(tf.compat.v1.global_variables()) == 2      # W and its momentum slot, in g
    sess = _session(g)
    _, last = sess.run(out)
    Wn, acc = np.zeros((3, 1)), np.zeros((3, 1))
    for _ in range(20):
        r = X @ Wn - y
        loss = np.mean(r * r)
        acc = acc * 0.9 + 2 * X.T @ r / len(X)
        Wn = Wn - 0.05 * acc
    assert last == pytest.approx(loss, rel=1e-4)
    np.testing.assert_allclose(sess.run(W), Wn, rtol=1e-4, atol=1e-6)


def test_creating_a_variable_inside_a_branch_is_refused():
    g = tf.Graph()
    with g.as_default():
        p = ph(tf.bool, [])
        with pytest.raises(NotImplementedError, match="creating a variable inside"):
            tf.cond(p, lambda: tf.Variable(1.0) * 2.0, lambda: tf.constant(0.0))


def test_gradient_through_a_read_in_a_branch_that_assigns(no_fallback):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(3.0)
        x = ph(tf.float32, [])
        p = ph(tf.bool, [])
        y = tf.cond(p, lambda: v.assign_add(1.0) * x * x, lambda: v * x)
        gx, gv = tf.gradients(y, [x, v])
    sess = _session(g)
    # true: y = (v + 1) x^2 -> dy/dx = 2 (v + 1) x, dy/dv = x^2 (v read as it enters)
    assert sess.run([gx, gv], {x: 2.0, p: True}) == [pytest.approx(16.0), pytest.approx(4.0)]
    # v is 4 now; false: y = v x -> dy/dx = v, dy/dv = x
    assert sess.run([gx, gv], {x: 2.0, p: False}) == [pytest.approx(4.0), pytest.approx(2.0)]


def test_bad_assignments_in_a_branch_raise_tf_errors():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable([1.0, 2.0])
        p = ph(tf.bool, [])
        with pytest.raises(ValueError):
            tf.cond(p, lambda: v.assign([1.0, 2.0, 3.0]), lambda: v * 1.0)
        with pytest.raises((TypeError, ValueError)):
            tf.cond(p, lambda: v.assign(tf.constant([1, 2])), lambda: v * 1.0)
        with pytest.raises(NotImplementedError, match="condition of tf.while_loop"):
            tf.while_loop(lambda i: v.assign_add([1.0, 1.0])[0] < 3.0, lambda i: i + 1, [0])


def test_assign_with_read_value_false_in_a_branch_returns_an_operation(no_fallback):
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0)
        p = ph(tf.bool, [])
        ops = []

        def true_fn():
            ops.append(v.assign(7.0, read_value=False))
            with cd([ops[-1]]):
                return tf.constant(0.0)

        def unused():
            ops.append(v.assign(9.0, read_value=False))
            return tf.constant(0.0)
        c = tf.cond(p, true_fn, lambda: tf.constant(1.0))
        plain = tf.cond(p, unused, lambda: tf.constant(1.0))
    assert isinstance(ops[0], tf.Operation)
    sess = _session(g)
    assert sess.run(plain, {p: True}) == 0.0 and sess.run(v) == 1.0
    assert sess.run(c, {p: True}) == 0.0 and sess.run(v) == 7.0


def test_unused_assignments_in_a_function_still_run(no_fallback):
    """In a tf.function TF's automatic control dependencies run every assignment in a branch
    or body, used or not (TF 2.21: v is 5.0 after f, 1 + 0 + 1 + 2 = 4.0 after g)."""
    v = tf.Variable(1.0)

    @tf.function
    def f():
        tf.cond(tf.constant(True), lambda: (v.assign(5.0), tf.constant(1.0))[1], lambda: tf.constant(2.0))
        return tf.constant(0.0)

    @tf.function
    def g():
        return tf.while_loop(lambda i: i < 3, lambda i: (v.assign_add(tf.cast(i, tf.float32)), i + 1)[1], [0])

    f()
    assert v.numpy() == 5.0
    v.assign(1.0)
    g()
    assert v.numpy() == 4.0


# ---------------------------------------------------------------- jitgrad.function and AutoGraph
def test_function_autograph_if_while_for_assign_variables(no_fallback):
    v = tf.Variable(1.0)
    total = tf.Variable(0)

    @tf.function
    def f(x, n):
        if x > 0:
            v.assign(v * 2.0)
        else:
            v.assign_sub(1.0)
        seen = v + 0.0            # read after the if: the new value
        i = tf.constant(0)
        while i < n:
            v.assign_add(1.0)
            i += 1
        for k in tf.range(n):
            total.assign_add(k)
        return seen, v.read_value()

    assert [float(t) for t in f(tf.constant(1.0), tf.constant(3))] == [2.0, 5.0]
    assert v.numpy() == 5.0 and total.numpy() == 3
    assert [float(t) for t in f(tf.constant(-1.0), tf.constant(2))] == [4.0, 6.0]
    assert v.numpy() == 6.0 and total.numpy() == 4
    assert f.experimental_get_tracing_count() == 1


def test_function_training_loop_with_gradient_tape_in_a_for(no_fallback):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((8, 2)).astype(np.float32)
    y = (X @ np.array([2.0, -1.0], np.float32)).astype(np.float32)
    w = tf.Variable(np.zeros(2, np.float32))

    @tf.function
    def train(steps):
        loss = tf.constant(0.0)
        for _ in tf.range(steps):
            with tf.GradientTape() as tape:   # (the tape is no loop variable: TF's liveness)
                loss = tf.reduce_mean(tf.square(tf.linalg.matvec(X, w) - y))
            (gw,) = tape.gradient(loss, [w])
            w.assign_sub(0.05 * gw)
        return loss

    loss = float(train(tf.constant(30)))
    wn = np.zeros(2)
    for _ in range(30):
        r = X @ wn - y
        last = np.mean(r * r)
        wn = wn - 0.05 * (2 * X.T @ r / len(X))
    assert loss == pytest.approx(last, rel=1e-4)
    np.testing.assert_allclose(w.numpy(), wn, rtol=1e-4, atol=1e-6)


def test_keras_adam_steps_in_a_function_loop_match_the_same_steps_eagerly(no_fallback):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((10, 3)).astype(np.float32)
    y = (X @ np.array([[0.5], [1.0], [-1.5]], np.float32)).astype(np.float32)

    def make():
        w = tf.Variable(np.zeros((3, 1), np.float32))
        opt = tf.keras.optimizers.Adam(0.1)

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(X, w) - y))
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
            return loss
        return w, opt, step

    w, opt, step = make()

    @tf.function
    def train(n):
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            loss = step()
        return loss
    loss = float(train(tf.constant(10)))
    w_e, opt_e, step_e = make()
    for _ in range(10):
        loss_e = float(step_e())
    assert int(opt.iterations.numpy()) == 10 == int(opt_e.iterations.numpy())
    assert loss == pytest.approx(loss_e, rel=1e-5)
    np.testing.assert_allclose(w.numpy(), w_e.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- tf.print inside staged control flow
def test_fizzbuzz_from_the_tf_guide_prints_what_tf_prints(capfd, no_fallback):
    # TF guide "Better performance with tf.function", AutoGraph conditionals; output as documented there
    @tf.function
    def fizzbuzz(n):
        for i in tf.range(1, n + 1):
            print('Tracing for loop')
            if i % 15 == 0:
                print('Tracing fizzbuzz branch')
                tf.print('fizzbuzz')
            elif i % 3 == 0:
                print('Tracing fizz branch')
                tf.print('fizz')
            elif i % 5 == 0:
                print('Tracing buzz branch')
                tf.print('buzz')
            else:
                print('Tracing default branch')
                tf.print(i)

    fizzbuzz(tf.constant(5))
    fizzbuzz(tf.constant(20))
    out, err = capfd.readouterr()
    assert out.split("\n") == ["Tracing for loop", "Tracing fizzbuzz branch", "Tracing fizz branch",
                               "Tracing buzz branch", "Tracing default branch", ""]
    assert err.split() == ("1 2 fizz 4 buzz 1 2 fizz 4 buzz fizz 7 8 fizz buzz 11 fizz 13 14 fizzbuzz 16 17 "
                           "fizz 19 buzz").split()


def test_print_in_graph_mode_branch_and_loop_runs_when_they_run(capfd, no_fallback):
    g = tf.Graph()
    with g.as_default():
        p = ph(tf.bool, [])
        n = ph(tf.int32, [])
        x = ph(tf.float32, [2])
        c = tf.cond(p, lambda: (tf.print("then", x, output_stream=sys.stdout), x * 2.0)[1],
                    lambda: x - 1.0)

        def body(i, s):
            tf.print("iteration", i, "s =", s, output_stream=sys.stdout)
            return i + 1, s + 1.5
        loop = tf.while_loop(lambda i, s: i < n, body, [0, 0.0])
    sess = tf.compat.v1.Session(graph=g)
    np.testing.assert_array_equal(sess.run(c, {p: True, x: [1.0, 2.5]}), [2.0, 5.0])
    np.testing.assert_array_equal(sess.run(c, {p: False, x: [1.0, 2.5]}), [0.0, 1.5])
    sess.run(loop, {n: 3})
    sess.run(loop, {n: 0})
    out, _ = capfd.readouterr()
    assert out == "then [1 2.5]\niteration 0 s = 0\niteration 1 s = 1.5\niteration 2 s = 3\n"


def test_cond_whose_branches_only_print_is_an_op_that_prints_the_taken_one(capfd, no_fallback):
    g = tf.Graph()
    with g.as_default():
        p = ph(tf.bool, [])
        c = tf.cond(p, lambda: tf.print("yes", output_stream=sys.stdout) and None,
                    lambda: tf.print("no", output_stream=sys.stdout) and None)
    assert isinstance(c, tf.Operation)
    sess = tf.compat.v1.Session(graph=g)
    sess.run(c, {p: True})
    sess.run(c, {p: False})
    sess.run(c, {p: False})
    assert capfd.readouterr().out == "yes\nno\nno\n"


def test_prints_keep_program_order_around_and_inside_a_loop(capfd, no_fallback):
    @tf.function
    def f(n):
        tf.print("before", output_stream=sys.stdout)
        i = tf.constant(0)
        while i < n:
            tf.print("a", i, output_stream=sys.stdout)
            if i % 2 == 1:
                tf.print("odd", output_stream=sys.stdout)
            tf.print("b", i, output_stream=sys.stdout)
            i += 1
        tf.print("after", i, output_stream=sys.stdout)
        return i
    assert int(f(tf.constant(3))) == 3
    out, _ = capfd.readouterr()
    assert out == "before\na 0\nb 0\na 1\nodd\nb 1\na 2\nb 2\nafter 3\n"


def test_prints_in_nested_loops_a_loop_condition_and_two_regions_in_order(capfd, no_fallback):
    @tf.function
    def f(n):
        tf.print("start", output_stream=sys.stdout)
        for i in tf.range(n):
            j = tf.constant(0)
            while j < i:
                tf.print("  inner", i, j, output_stream=sys.stdout)
                j += 1
            tf.print("outer", i, output_stream=sys.stdout)
        tf.print("between", output_stream=sys.stdout)

        def cond(k):
            tf.print("test", k, output_stream=sys.stdout)
            return k < 2
        k = tf.while_loop(cond, lambda k: k + 1, [0])
        tf.print("end", output_stream=sys.stdout)
        return k
    assert int(f(tf.constant(3))[0]) == 2
    out, _ = capfd.readouterr()
    assert out == ("start\nouter 0\n  inner 1 0\nouter 1\n  inner 2 0\n  inner 2 1\nouter 2\nbetween\n"
                   "test 0\ntest 1\ntest 2\nend\n")


def test_two_identical_prints_in_a_body_both_print(capfd, no_fallback):
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [])

        def body(i):
            tf.print("tick", output_stream=sys.stdout)
            tf.print("tick", output_stream=sys.stdout)
            for _ in range(2):    # two identical conds that print
                tf.cond(i > 0, lambda: tf.print("tock", output_stream=sys.stdout) and None, lambda: None)
            return i + 1
        loop = tf.while_loop(lambda i: i < n, body, [0])
    tf.compat.v1.Session(graph=g).run(loop, {n: 2})
    assert capfd.readouterr().out == "tick\ntick\ntick\ntick\ntock\ntock\n"


_DISK_SCRIPT = """
import sys
import jitgrad as tf
@tf.function
def f(n):
    for i in tf.range(n):
        if i % 2 == 0:
            tf.print("even", i, output_stream=sys.stdout)
    return n
f(tf.constant(5))
info = tf.cache_info()
print(info["disk_hits"], info["compiles"], info["fallbacks"])
"""


@pytest.mark.parametrize("loader", ["elf", "mcjit"])
def test_a_kernel_that_prints_comes_back_from_the_disk_cache(tmp_path, loader, graph_mode):
    import os
    import subprocess
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(tmp_path / "cache"), JITGRAD_CACHE="1", JITGRAD_LOADER=loader,
               JITGRAD_MODE=graph_mode)
    script = tmp_path / "prints.py"      # (AutoGraph reads the function's source)
    script.write_text(_DISK_SCRIPT)
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           check=True).stdout.split("\n") for _ in range(2)]
    assert runs[0][:3] == runs[1][:3] == ["even 0", "even 2", "even 4"]
    if graph_mode == "compiled":
        assert runs[0][3].split() == ["0", "1", "0"] and runs[1][3].split() == ["1", "0", "0"]
    else:     # the interpreter prints the same, compiling nothing
        assert runs[0][3].split() == runs[1][3].split() == ["0", "0", "0"]


# ---------------------------------------------------------------- tf.case(exclusive=True)
def test_case_exclusive_checks_at_run_time(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.int32, [])
        out = tf.case([(x < 5, lambda: tf.constant(1)), (x > 2, lambda: tf.constant(2))],
                      default=lambda: tf.constant(3), exclusive=True)
        loose = tf.case([(x < 5, lambda: tf.constant(1)), (x > 2, lambda: tf.constant(2))],
                        default=lambda: tf.constant(3))
    sess = tf.compat.v1.Session(graph=g)
    assert sess.run(out, {x: 1}) == 1 and sess.run(out, {x: 9}) == 2
    assert sess.run(loose, {x: 4}) == 1          # not exclusive: the first true predicate wins
    with pytest.raises(InvalidArgumentError, match="Input error: exclusive=True: more than 1 conditions"):
        sess.run(out, {x: 4})


def test_case_without_default_asserts_the_last_predicate(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.int32, [])
        out = tf.case([(tf.equal(x, 1), lambda: tf.constant(2))], exclusive=True)
    sess = tf.compat.v1.Session(graph=g)
    assert sess.run(out, {x: 1}) == 2
    with pytest.raises(InvalidArgumentError, match="Input error: None of conditions evaluated as True"):
        sess.run(out, {x: 4})


def test_case_exclusive_in_a_function_and_eagerly(no_fallback):
    @tf.function
    def f(x):
        return tf.case([(x < 5, lambda: x * 10), (x > 2, lambda: x * 100)], default=lambda: -x, exclusive=True)
    assert int(f(tf.constant(1))) == 10 and int(f(tf.constant(9))) == 900
    with pytest.raises(InvalidArgumentError, match="exclusive=True"):
        f(tf.constant(3))
    with tf.compat.v1.Graph().as_default():
        pass
    # eagerly (the predicates are computed first, as TF's eager tf.case)
    x = tf.constant(4)
    # TF's eager Assert text: "Expected '<cond>' to be true. Summarized data: b'<message>'\n<values>"
    with pytest.raises(InvalidArgumentError, match=r"more than 1 conditions .* evaluated as True:'\nTrue, True$"):
        tf.case([(x < 5, lambda: x), (x > 2, lambda: x)], default=lambda: x, exclusive=True)
    assert int(tf.case([(x < 5, lambda: x), (x > 2, lambda: x * 2)], default=lambda: x)) == 4
    with pytest.raises(InvalidArgumentError, match="None of conditions evaluated as True"):
        tf.case([(x > 5, lambda: x)])


def test_assert_fails_the_run_with_its_message_and_values(no_fallback):
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.float32, [3])
        v = tf.Variable(0.0)
        a = tf.Assert(tf.reduce_all(x > 0), ["x must be positive:", x, "sum", tf.reduce_sum(x)])
        with tf.control_dependencies([a]):
            w = v.assign_add(1.0)
    sess = _session(g)
    assert sess.run(w, {x: [1.0, 2.0, 3.0]}) == 1.0
    with pytest.raises(InvalidArgumentError, match=r"assertion failed: \[x must be positive:\] \[1 -2 3\] "
                                                   r"\[sum\] \[2\]"):
        sess.run(w, {x: [1.0, -2.0, 3.0]})
    assert sess.run(v) == 1.0     # the failed run wrote nothing


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.bool_])
def test_printed_text_of_a_loop_is_the_same_compiled_and_interpreted(capfd, dt):
    """Tensors of each dtype and rank printed in a loop body and a branch: the compiled
    run (values handed over by the native code) prints exactly what the interpreter prints."""
    g = tf.Graph()
    with g.as_default():
        x = ph(dt, [2, 3])
        n = ph(tf.int32, [])

        def body(i, y):
            tf.print("i", i, "y", y, "row", y[0], summarize=2, output_stream=sys.stdout)
            tf.cond(i > 0, lambda: tf.print("again", y[:, 1], output_stream=sys.stdout) and None, lambda: None)
            return i + 1, tf.logical_not(y) if dt == np.bool_ else y * 2 + tf.cast(i, y.dtype)
        loop = tf.while_loop(lambda i, y: i < n, body, [0, x])
    xv = (np.arange(6).reshape(2, 3) % 2 == 0) if dt == np.bool_ else (np.arange(6).reshape(2, 3) * 1.25 - 3)
    texts = []
    for mode in ("interpret", "compiled"):
        before = tf.cache_info()["fallbacks"]
        sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(jitgrad_mode=mode))
        sess.run(loop, {x: xv.astype(dt), n: 3})
        assert tf.cache_info()["fallbacks"] == before
        texts.append(capfd.readouterr().out)
    assert texts[0] == texts[1] and texts[0].count("again") == 2 and texts[0].count("\n") == 8   # (y: 2 lines)


def test_a_loop_that_fails_midway_prints_its_lines_once_and_before_the_error(capfd, no_fallback):
    # Each iteration prints the row it gathered; the fourth gather is out of range. TF prints
    # the three lines before the error (a print that needs the failing gather cannot run), and
    # a later run prints only its own lines: none left over from the failed one.
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [])
        params = tf.constant([10.0, 20.0, 30.0])

        def body(i, s):
            v = tf.gather(params, i)
            tf.print("got", v, output_stream=sys.stdout)
            return i + 1, s + v
        loop = tf.while_loop(lambda i, s: i < n, body, [0, 0.0])
    sess = tf.compat.v1.Session(graph=g)
    with pytest.raises(InvalidArgumentError):
        sess.run(loop, {n: 5})
    out, _ = capfd.readouterr()
    assert out == "got 10\ngot 20\ngot 30\n"
    assert sess.run(loop, {n: 2})[1] == 30.0
    out, _ = capfd.readouterr()
    assert out == "got 10\ngot 20\n"


def test_assert_in_a_loop_body_fails_at_its_iteration_with_tf_message(capfd, no_fallback):
    # The loop halves s until it is small; the Assert requires s to stay above `floor`.
    # Expected iteration, values and message worked out by hand: s = 40, 20, 10, 5 ... and with
    # floor = 8 the check "s > floor" first fails at i = 3 (s = 5), after 3 printed lines.
    g = tf.Graph()
    with g.as_default():
        n = ph(tf.int32, [])
        floor = ph(tf.float32, [])
        v = tf.Variable(0.0)

        def body(i, s):
            tf.Assert(s > floor, ["s fell to", s, "at step", i])
            tf.print("step", i, "s", s, output_stream=sys.stdout)
            return i + 1, s / 2.0
        loop = tf.while_loop(lambda i, s: i < n, body, [0, 40.0])
        with tf.control_dependencies([loop[1]]):
            w = v.assign_add(1.0)
    sess = _session(g)
    assert sess.run(loop, {n: 3, floor: 8.0})[1] == 5.0
    out, _ = capfd.readouterr()
    assert out == "step 0 s 40\nstep 1 s 20\nstep 2 s 10\n"
    with pytest.raises(InvalidArgumentError, match=r"^assertion failed: \[s fell to\] \[5\] \[at step\] \[3\]"):
        sess.run([loop, w], {n: 6, floor: 8.0})
    out, _ = capfd.readouterr()
    assert out == "step 0 s 40\nstep 1 s 20\nstep 2 s 10\n"   # nothing from the failing step or after it
    assert sess.run(v) == 0.0                                # the failed run wrote nothing
    assert sess.run(w, {n: 6, floor: 0.0}) == 1.0            # the same kernel passes when the check holds
    capfd.readouterr()


def test_case_exclusive_inside_a_loop_and_a_branch(no_fallback):
    # tf.case(exclusive=True) in a loop body and in a cond branch: its Assert compiles with the
    # region. Hand-computed: for x = 1 each of the 3 steps adds case(...) = 1 -> 3; x = 4 makes
    # both predicates true, which exclusive=True rejects.
    g = tf.Graph()
    with g.as_default():
        x = ph(tf.int32, [])
        p = ph(tf.bool, [])

        def pick():
            return tf.case([(x < 5, lambda: tf.constant(1)), (x > 2, lambda: tf.constant(2))],
                           default=lambda: tf.constant(3), exclusive=True)
        loop = tf.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s + pick()), [0, 0])[1]
        branch = tf.cond(p, pick, lambda: tf.constant(-1))
    sess = tf.compat.v1.Session(graph=g)
    assert sess.run(loop, {x: 1}) == 3 and sess.run(loop, {x: 9}) == 6
    assert sess.run(branch, {x: 9, p: True}) == 2 and sess.run(branch, {x: 4, p: False}) == -1
    with pytest.raises(InvalidArgumentError, match="Input error: exclusive=True: more than 1 conditions"):
        sess.run(loop, {x: 4})
    with pytest.raises(InvalidArgumentError, match="Input error: exclusive=True: more than 1 conditions"):
        sess.run(branch, {x: 4, p: True})
