"""bench/bench_interleaved.py: every backend in its own process, timed in turns, and
jitgrad@PATH running another source tree's jitgrad next to this one."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_backends_timed_in_their_own_processes():
    env = dict(os.environ, JITGRAD_CACHE="0")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_interleaved.py"),
                        "--case", "W1", "--threads", "1", "--seconds", "0.5", "--turn", "0.05",
                        "--backends", f"jitgrad,jitgrad@{ROOT},numpy,no-such-backend"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = dict(re.findall(r"^  (\S+)\s+median\s+([\d.]+) ms", r.stdout, re.M))
    assert set(rows) == {"jitgrad", f"jitgrad@{ROOT}", "numpy"}, r.stdout
    assert all(float(v) > 0 for v in rows.values()), r.stdout
    # a backend it cannot build is reported and left out, not fatal
    assert re.search(r"^no-such-backend: ", r.stdout, re.M), r.stdout
    assert "threads=1" in r.stdout
