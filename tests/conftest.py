"""Shared test setup.

* ``reset_jitgrad_state`` (autouse): every test starts in TF 2's default state:
  eager execution enabled, a fresh global default graph, no default session,
  and the Session mode and flush-denormals mode it found (tests that switch
  modes cannot leak them).
* ``graph_mode``: runs a graph-mode test once per Session execution mode,
  "interpret" (the numpy reference kernels) and "compiled". A module opts in
  with ``pytestmark = pytest.mark.usefixtures("graph_mode")`` (or a test asks
  for the fixture by name); the fixture sets ``jitgrad.set_default_mode`` so
  every Session the test creates, including ones deep inside helpers or the
  seed examples, runs in that mode. ``--jitgrad-modes=interpret`` (or the
  JITGRAD_TEST_MODES environment variable, comma separated) restricts the modes.
"""
import os

import numpy as np
import pytest

import jitgrad
from jitgrad import context, denormals, session as _session

ALL_MODES = ("interpret", "compiled")

# A pass that raises fails the test instead of silently using the unoptimised program
# (jitgrad.compiler.STRICT_PASSES reads this when the compiler is first imported).
os.environ["JITGRAD_STRICT_PASSES"] = "1"

# Tests never read or write the user's kernel cache: counters such as
# "compiles == 1" must not depend on what an earlier run left on disk.
if "JITGRAD_TEST_USE_USER_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile
    os.environ["JITGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="jitgrad-test-cache-")
    atexit.register(shutil.rmtree, os.environ["JITGRAD_CACHE_DIR"], True)

try:  # hypothesis is a test extra; keep the suite fast and deterministic
    from hypothesis import settings as _hyp_settings

    _hyp_settings.register_profile("jitgrad", max_examples=25, deadline=None, derandomize=True,
                                   print_blob=True)
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "jitgrad"))
except ImportError:  # pragma: no cover
    pass


def pytest_configure(config):
    config.addinivalue_line("markers", "may_fall_back: a compiled-mode control-flow test whose runs may "
                                       "use the interpreter (tests/test_control_flow.py)")


def pytest_addoption(parser):
    parser.addoption("--jitgrad-modes", action="store", default=None,
                     help="comma-separated Session modes for graph-mode tests (default: interpret,compiled)")


def _selected_modes(config):
    raw = config.getoption("--jitgrad-modes") or os.environ.get("JITGRAD_TEST_MODES") or ",".join(ALL_MODES)
    modes = [m.strip() for m in raw.split(",") if m.strip()]
    bad = [m for m in modes if m not in ALL_MODES]
    if bad:
        raise pytest.UsageError(f"unknown jitgrad mode(s) {bad}; choose from {ALL_MODES}")
    return modes


def pytest_generate_tests(metafunc):
    if "graph_mode" in metafunc.fixturenames:
        modes = _selected_modes(metafunc.config)
        metafunc.parametrize("graph_mode", modes, indirect=True, ids=[f"mode={m}" for m in modes])


@pytest.fixture
def graph_mode(request):
    """The Session execution mode of this run of the test ('interpret' or 'compiled')."""
    mode = getattr(request, "param", "interpret")
    jitgrad.set_default_mode(mode)
    return mode


@pytest.fixture
def no_fallback(graph_mode):
    """Fails a compiled-mode test whose runs fell back to the interpreter."""
    before = jitgrad.cache_info()["fallbacks"]
    yield
    if graph_mode == "compiled":
        assert jitgrad.cache_info()["fallbacks"] == before, "a run fell back to the interpreter"


@pytest.fixture(autouse=True)
def reset_jitgrad_state():
    saved_mode = jitgrad.get_default_mode()
    saved_flush = denormals.enabled()
    _reset()
    try:
        yield
    finally:
        _reset()
        jitgrad.set_default_mode(saved_mode)
        denormals.set_enabled(saved_flush)    # a test that pins the flush-denormals mode cannot leak it


def _reset():
    # A test that failed inside `with g.as_default():` has unwound its context
    # managers already; clearing the stacks also covers sessions/graphs that a
    # test entered by hand and never exited.
    context._stack().clear()
    _session._stack().clear()
    context.enable_eager_execution()
    context.enable_tensor_equality()
    context.reset_global_default_graph()


@pytest.fixture
def keep_denormals():
    """Pins numpy's keep-denormals numerics (flush-denormals mode off, the opt-out) for a test
    whose claim is about IEEE arithmetic on denormals; reset_jitgrad_state restores the mode."""
    denormals.set_enabled(False)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
