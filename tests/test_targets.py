"""Compiling for a named CPU (jitgrad/codegen/target.py): the Session option and
environment variables, the cache key, explain, and refusing to run code the host
cannot execute.  Kernel-level code generation per target is tested in
test_vecmath.py and test_matmul_kernel.py."""
import re

import numpy as np
import pytest

import jitgrad as tf
from jitgrad import compiler, denormals
from jitgrad.codegen import target as tg
from jitgrad.errors import FailedPreconditionError


def _mlp_graph():
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((37, 50)).astype(np.float32) * 0.1
    W2 = rng.standard_normal((50, 10)).astype(np.float32) * 0.1
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (64, 37))
        w1 = tf.constant(W1)
        h = tf.nn.relu(tf.matmul(x, w1))
        y = tf.reduce_sum(tf.tanh(tf.matmul(h, tf.constant(W2))))
        gw = tf.gradients(y, w1)[0]
    X = rng.standard_normal((64, 37)).astype(np.float32)
    # numpy in float64: value and gradient
    H = np.maximum(X.astype(np.float64) @ W1, 0)
    Z = H @ W2
    dZ = 1 - np.tanh(Z) ** 2
    dW1 = X.T.astype(np.float64) @ ((dZ @ W2.T) * (H > 0))
    return g, x, y, gw, X, (np.tanh(Z).sum(), dW1)


def _session(g, cpu=None, features=None):
    cfg = tf.compat.v1.ConfigProto(jitgrad_target_cpu=cpu, jitgrad_target_features=features)
    return tf.compat.v1.Session(graph=g, config=cfg)


def _host_lacking_feature():
    """A feature LLVM knows that this host lacks (None if it has them all)."""
    host = tg._split_features(tg._host_facts()["features"])
    for f in ("avx512fp16", "amx-tile", "avx512vp2intersect", "avx512f", "avx2"):
        if f in host and not host[f]:
            return f
    return None


@pytest.mark.parametrize("cpu, level, widest", [
    ("x86-64", "x86-64", "xmm"), ("haswell", "avx2", "ymm"), ("skylake-avx512", "avx512", "zmm")])
def test_session_target_compiles_for_that_cpu(cpu, level, widest):
    g, x, y, gw, X, (want_y, want_g) = _mlp_graph()
    with _session(g, cpu) as s:
        rep = s.explain([y, gw], {x: X})
        assert f"cpu {cpu}: level {level}" in rep.target
        assert f"target: cpu {cpu}" in str(rep)
        used = set(re.findall(r"%([xyz]mm)\d", rep.asm))
        assert max(used, key=lambda r: "xyz".index(r[0])) == widest, used
        if tg.get(cpu).missing_on_host():
            return
        got_y, got_g = s.run([y, gw], {x: X})
    np.testing.assert_allclose(got_y, want_y, rtol=1e-4)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-4, atol=1e-4 * np.abs(want_g).max())


def test_target_is_part_of_the_cache_key(monkeypatch):
    monkeypatch.delenv(tg.ENV_CPU, raising=False)        # None below means the host
    monkeypatch.delenv(tg.ENV_FEATURES, raising=False)
    g, x, y, gw, X, _ = _mlp_graph()
    compiler.clear_cache()
    keys = set()
    for cpu in (None, "haswell", "x86-64", "haswell"):
        with _session(g, cpu) as s:
            s.run([y, gw], {x: X})
            keys.add(s.explain([y, gw], {x: X}).key)
    assert len(keys) == 3
    info = compiler.cache_info()
    # one kernel per target (from a compile, or the disk cache of an earlier test);
    # the second haswell session reuses the first one's
    assert info.compiles + info.disk_hits == 3 and info.kernels == 3, info


def test_environment_variables_choose_the_target(monkeypatch):
    g, x, y, gw, X, (want_y, _) = _mlp_graph()
    monkeypatch.setenv(tg.ENV_CPU, "haswell")
    monkeypatch.setenv(tg.ENV_FEATURES, "-avx2")   # haswell without AVX2: LLVM drops to SSE/AVX1
    assert tg.current().level == "x86-64"
    with tf.compat.v1.Session(graph=g) as s:
        rep = s.explain(y, {x: X})
        assert "cpu haswell features -avx2" in rep.target
        assert not re.search(r"%zmm|vpaddd\s+%ymm", rep.asm)
        # LLVM still uses AVX and FMA there: running it needs them on the host
        assert {"avx", "fma"} <= set(tg.current().uses)
        if not tg.current().missing_on_host():
            np.testing.assert_allclose(s.run(y, {x: X}), want_y, rtol=1e-4)
    monkeypatch.delenv(tg.ENV_FEATURES)
    assert tg.current().level == "avx2"
    # a Session's own option wins over the environment
    with _session(g, "x86-64") as s:
        assert "cpu x86-64:" in s.explain(y, {x: X}).target


def test_bad_target_names_raise_value_error():
    g = _mlp_graph()[0]
    with pytest.raises(ValueError, match="does not know the CPU"):
        _session(g, "no-such-cpu-9000")
    with pytest.raises(ValueError, match="must start with"):
        _session(g, "haswell", "avx2")
    with pytest.raises(ValueError, match="does not know a feature"):
        tg.get("haswell", "+no-such-feature")


def test_code_for_a_cpu_the_host_lacks_is_refused_not_run():
    lacking = _host_lacking_feature()
    assert lacking is not None, "host has every probed feature"
    g, x, y, gw, X, _ = _mlp_graph()
    with _session(g, "x86-64", "+" + lacking) as s:
        rep = s.explain(y, {x: X})           # compiling and inspecting is fine
        assert "not loaded" in str(rep) and rep.asm
        for _ in range(2):                   # the general path, then the fast runner's
            with pytest.raises(FailedPreconditionError, match=lacking):
                s.run(y, {x: X})


def test_missing_features_against_an_avx2_only_host(monkeypatch):
    facts = dict(tg._host_facts())
    feats = tg._split_features(facts["features"])
    feats.update({f: False for f in feats if f.startswith("avx512")})
    feats.update({"avx": True, "avx2": True, "fma": True, "f16c": True, "bmi": True, "bmi2": True,
                  "lzcnt": True, "movbe": True})
    facts["features"] = ",".join(("+" if on else "-") + f for f, on in feats.items())
    monkeypatch.setattr(tg, "_host_facts", lambda: facts)
    assert "avx512f" in tg.get("skylake-avx512").missing_on_host()
    assert tg.get("haswell").missing_on_host() == []
    assert tg.get("x86-64").missing_on_host() == []
    with pytest.raises(FailedPreconditionError, match="skylake-avx512"):
        tg.check_runnable(tg.get("skylake-avx512"))
    assert tg.foreign_code({"target": "skylake-avx512|"}) is not None
    assert tg.foreign_code({"target": "haswell|"}) is None


@pytest.mark.parametrize("level, vw32, vw64", [("avx512", 16, 8), ("avx2", 8, 4), ("x86-64", 4, 2)])
def test_matmul_blocking_follows_the_level(level, vw32, vw64):
    t = tg.Target("cpu", "", level, False)
    c32, c64 = t.matmul_config("float32"), t.matmul_config("float64")
    assert (c32["vw"], c64["vw"]) == (vw32, vw64)
    regs = {"avx512": 32, "avx2": 16, "x86-64": 16}[level]
    for c in (c32, c64):
        assert c["nr"] % c["vw"] == 0
        # accumulators + one row of B vectors + the broadcast of A fit the register file
        assert c["mr"] * c["nr"] // c["vw"] + c["nr"] // c["vw"] + 1 <= regs
    assert tg.Target("cpu", "+prefer-256-bit", "avx512", False).matmul_config("float32")["vw"] == 8


def _rounding_edge_values(dt):
    """Where an inline rounding sequence goes wrong: signed zeros, halves (ties to
    even), just below / at / above 2**mant (from there on x is its own integer),
    the extremes, denormals, inf and NaN; then random values over many magnitudes."""
    mant = np.finfo(dt).nmant
    big = float(2.0 ** mant)
    base = [0.0, 0.3, 0.5, 0.7, 1.0, 1.5, 2.5, 3.5, 1e-30, 0.49999997, 0.50000006,
            big - 1.5, big - 0.5, big, big + 1, 2 * big + 2, 1e30, np.finfo(dt).max,
            np.finfo(dt).tiny, np.finfo(dt).smallest_subnormal, np.inf]
    vals = np.array(base + [-v for v in base] + [np.nan], dt)
    rng = np.random.default_rng(13)
    rand = (rng.standard_normal(2000) * 10.0 ** rng.integers(-3, mant // 3 + 8, 2000)).astype(dt)
    halves = (rng.integers(-2 ** 20, 2 ** 20, 500) + 0.5).astype(dt)
    return np.concatenate([vals, rand, halves])


def _same_values(got, want):
    """Equal as numpy's results, NaN where numpy has NaN and the sign of zero kept."""
    np.testing.assert_array_equal(got, want)
    num = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_baseline_target_rounds_without_libm(dtype):
    """The SSE2 baseline has no round instruction (SSE4.1): Floor, Ceil, Round and
    float FloorDiv / TruncateDiv are inline code there -- no call in the kernel (libm's floorf
    was called per element before) -- and give numpy's values (TF's Round is
    half to even: np.rint; FloorDiv is floor(x / y), as the reference kernel). In the
    flush-denormals mode (the default, TF's numerics) those values are numpy's on the
    inputs and on x / y with denormals flushed: floor(-1e-45) is -0, not -1."""
    assert tg.get("x86-64").has_round is False
    assert tg.get("haswell").has_round and tg.get("skylake-avx512").has_round
    X = _rounding_edge_values(dtype)
    Y = np.resize(np.array([0.75, -0.75, 3.0, -0.0, 0.0, 1e-3, -7.0, np.inf, 2.0], dtype), X.shape)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(dtype, X.shape)
        y = tf.compat.v1.placeholder(dtype, X.shape)
        outs = [tf.floor(x), tf.math.ceil(x), tf.round(x), tf.math.floordiv(x, y), tf.truncatediv(x, y)]
    fl = denormals.flush if tf.config.get_flush_denormals() else (lambda a: a)
    Xf, Yf = fl(X), fl(Y)
    with np.errstate(all="ignore"):
        want = [np.floor(Xf), np.ceil(Xf), np.rint(Xf), np.floor(fl(Xf / Yf)), np.trunc(fl(Xf / Yf))]
    with _session(g, "x86-64") as s:
        asm = s.explain(outs, {x: X, y: Y}).asm
        assert "roundp" not in asm and "rounds" not in asm
        # (the flush-denormals mode's entry wrapper calls the kernel's body: not a libm call)
        asm = re.sub(r"movabsq\t\$\w+_body, %rax\n\tcallq\t\*%rax", "", asm)
        assert not re.search(r"\bcall", asm), re.findall(r"\bcall\w*\s+\S+", asm)[:4]
        got = s.run(outs, {x: X, y: Y})
    for op, gv, wv in zip(("Floor", "Ceil", "Round", "FloorDiv", "TruncateDiv"), got, want):
        assert gv.dtype == dtype, op
        _same_values(gv, wv)
    with tf.compat.v1.Session(graph=g) as host:   # roundss/roundps on the host: the same bits
        for gv, hv in zip(got, host.run(outs, {x: X, y: Y})):
            _same_values(gv, hv)


def test_named_cpu_level_is_kept_in_the_disk_cache(monkeypatch, tmp_path):
    """A named CPU's level is LLVM's answer (a probe child process); it is stored with
    the cache's facts, so another process (here: an empty table of targets) reads it
    instead of probing again -- and a different feature string is probed afresh."""
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path / "cache"))     # an empty disk cache
    monkeypatch.delenv("JITGRAD_CACHE", raising=False)
    probed = []
    real = tg._probe_level
    monkeypatch.setattr(tg, "_probe_level", lambda cpu, f: probed.append((cpu, f)) or real(cpu, f))
    monkeypatch.setattr(tg, "_targets", {})
    first = tg.get("haswell", "+avx2")
    monkeypatch.setattr(tg, "_targets", {})
    again = tg.get("haswell", "+avx2")
    assert (again.level, again.uses) == (first.level, first.uses) == ("avx2", first.uses)
    assert probed == [("haswell", "+avx2")]
    monkeypatch.setattr(tg, "_targets", {})
    assert tg.get("haswell", "-fma").level == "x86-64"    # no FMA: not the AVX2 level
    assert probed[-1] == ("haswell", "-fma")


def test_icelake_server_float32_blocking_is_its_measured_tile():
    """target._MATMUL_CPU: icelake-server float32 GEMMs take 12 x 32 and MC 72 (W3 A/B);
    float64, other AVX-512 CPUs (znver4's sweep preferred 8 x 32) and 256-bit code keep
    their level's blocking.  The taller tile still fits the register file."""
    icx = tg.Target("icelake-server", "", "avx512", False)
    c32 = icx.matmul_config("float32")
    assert (c32["mr"], c32["nr"], c32["mc"], c32["vw"]) == (12, 32, 72, 16)
    assert c32["mr"] * c32["nr"] // c32["vw"] + c32["nr"] // c32["vw"] + 1 <= c32["regs"]
    assert c32["mc"] % c32["mr"] == 0
    generic = tg.Target("cpu", "", "avx512", False)
    assert icx.matmul_config("float64") == generic.matmul_config("float64")
    assert tg.Target("znver4", "", "avx512", False).matmul_config("float32") == generic.matmul_config("float32")
    assert generic.matmul_config("float32")["mr"] == 8
    assert tg.Target("icelake-server", "+prefer-256-bit", "avx512", False).matmul_config("float32") == \
        tg.Target("cpu", "", "avx2", False).matmul_config("float32")
