"""Command line: `python -m jitgrad {demo,explain,cache,bench}` (also the `jitgrad` script)."""
import os
import runpy
import sys

from . import demo
from .cache import cli as cache_cli

USAGE = """usage: python -m jitgrad COMMAND [args]

commands:
  demo      run the seed documents' examples through the compiler, print results and cache statistics
  explain   show what the compiler does with a seed example (passes, loop nests, LLVM IR, assembly)
  cache     on-disk kernel cache: info | clear | prune [--max-bytes N]
  bench     run the benchmark suite (bench/run.py)
"""


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd == "demo":
        run = demo.main
    elif cmd == "explain":
        run = demo.explain_main
    elif cmd == "cache":
        run = cache_cli.main
    elif cmd == "bench":
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "run.py")
        if not os.path.exists(path):
            print("bench/run.py not found (the benchmark suite lives in the source checkout)", file=sys.stderr)
            return 2
        sys.argv = [path] + rest
        runpy.run_path(path, run_name="__main__")
        return 0
    else:
        print(f"unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return run(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
