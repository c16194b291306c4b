"""`python -m jitgrad demo`: runs every example of the seed documents through
jitgrad (compiled by default) and prints its result next to the number the
document prints, then the kernel-cache statistics."""
import io
import sys
from contextlib import redirect_stdout

import numpy as np
import jitgrad as tf
from jitgrad.seeds import graph_examples as G


def _show(value):
    """What the document's `print(...)` shows; a tuple stands for several prints."""
    if isinstance(value, tuple):
        return " | ".join(_show(v) for v in value)
    # numpy >= 2 prints float32 scalars inside lists as np.float32(2.0); the
    # documents were printed with numpy 1.x, whose repr is 2.0.
    with np.printoptions(legacy="1.25"):
        return str(value)


def _row(name, got, expected):
    ok = got == expected
    print(f"  {'ok ' if ok else 'DIFF'} {name:<28} {got}" + ("" if ok else f"   (document: {expected})"))
    return ok


def run_graph_examples():
    ok = True
    print("Document 004, graph mode (tf.Graph + tf.compat.v1.Session):")
    for name, fn, expected in G.DOC_004:
        ok &= _row(name, _show(fn()), expected)
    v, _vals = G.minimum_search()
    ok &= _row("minimum_search: x*", f"{v}", "1.9999998807907104")
    f = lambda x: 2 * ((x - 2) ** 2) + 3  # noqa: E731 - the document's lambda
    print(f"       document's f(x*) with numpy {np.__version__}: {f(v)}; in float64 (numpy 1.x promotion, "
          f"as the document ran): {f(float(v))}")
    ok &= _row("minimum_search: f(x*) f64", f"{f(float(v))}", "3.0000000000000284")
    print("Document 000, TF1 style (top-level graph + tf.Session(), eager execution disabled):")
    tf.compat.v1.disable_eager_execution()
    try:
        for name, fn, expected in G.DOC_000:
            tf.compat.v1.reset_default_graph()
            ok &= _row(name, _show(fn()), expected)
    finally:
        tf.compat.v1.enable_eager_execution()
        tf.compat.v1.reset_default_graph()
    return ok


def run_eager_examples():
    try:
        from jitgrad.seeds import eager_examples as E
    except ImportError:
        print("Eager examples: not available in this build.")
        return True
    ok = True
    print("Document 004, eager mode (tf.GradientTape):")
    for name, fn, expected in E.EXAMPLES:
        buf = io.StringIO()
        with redirect_stdout(buf):
            fn()
        got = buf.getvalue().rstrip("\n")
        ok &= _row(name, got.replace("\n", " | "), expected.replace("\n", " | "))
    if int(np.__version__.split(".")[0]) >= 2:
        print("  note: '极值：3.0' and '手工权重：... 29.100000381469727' are the user's own numpy arithmetic on\n"
              "  float32 scalars; numpy >= 2 keeps float32 (NEP 50) where the document's numpy 1.x printed\n"
              "  3.0000000000000284 and 29.1. Every number jitgrad computes is the document's.")
    return ok


def main(argv=None):
    print(f"jitgrad {tf.__version__}, execution mode: {tf.get_default_mode()}")
    ok = run_graph_examples()
    ok &= run_eager_examples()
    info = getattr(tf, "cache_info", None)
    if info is not None:
        print(f"Kernel cache: {info()}")
    print("All seed examples match the documents." if ok else "Some examples differ from the documents.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())


def explain_main(argv=None):
    """`python -m jitgrad explain`: the compiler's report for the seed example
    z = x**2 + y**3, tf.gradients(z, [x, y]) (document 004, 多元求导)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        y = tf.constant(2.0)
        z = x ** 2 + y ** 3
        grad = tf.gradients(z, [x, y])
    sess = tf.compat.v1.Session(graph=g)
    print(f"seed example: z = x**2 + y**3, tf.gradients(z, [x, y]) -> {_show(sess.run(grad))}")
    print(sess.explain(grad))
    return 0
