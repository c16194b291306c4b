"""The command line: `python -m jitgrad demo | explain | cache`."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "jitgrad", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_demo_runs_every_seed_example_and_they_match():
    r = run("demo")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "All seed examples match the documents." in r.stdout
    assert "DIFF" not in r.stdout
    assert "1.9999998807907104" in r.stdout and "29.09999656677246" in r.stdout
    assert "Kernel cache:" in r.stdout and "compiles" in r.stdout


def test_demo_runs_without_the_optional_ml_dtypes():
    # `pip install -e .` (the README's first command) does not install ml_dtypes; the demo's
    # eager gradients once reached for bfloat16's numpy dtype in every sum and raised TypeError.
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    hide = ("import sys, runpy; sys.modules['ml_dtypes'] = None; sys.argv = ['jitgrad', 'demo']; "
            "runpy.run_module('jitgrad', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "All seed examples match the documents." in r.stdout


def test_explain_shows_passes_ir_and_assembly():
    r = run("explain")
    assert r.returncode == 0, r.stderr
    for part in ("[2.0, 12.0]", "-- passes", "constant_fold", "-- LLVM IR", "-- assembly", "kernel source:"):
        assert part in r.stdout, part


def test_cache_info_and_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path / "c"))
    r = run("cache", "info")
    assert r.returncode == 0 and str(tmp_path / "c") in r.stdout
    assert run("cache", "clear").returncode == 0


def test_unknown_command_is_an_error():
    r = run("frobnicate")
    assert r.returncode == 2 and "unknown command" in r.stderr
