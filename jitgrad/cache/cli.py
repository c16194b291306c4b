"""`python -m jitgrad cache {info,clear,prune [--max-bytes N]}` (also `jitgrad cache ...`)."""
import argparse
import sys

from .disk import default_cache, parse_size


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="jitgrad cache", description="on-disk kernel cache")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("info", help="location, entries, size, limit, enabled")
    sub.add_parser("clear", help="remove every entry")
    pr = sub.add_parser("prune", help="evict least-recently-used entries down to the limit")
    pr.add_argument("--max-bytes", type=parse_size, default=None,
                    help="target size (bytes, or with K/M/G suffix); default JITGRAD_CACHE_MAX_BYTES or 1G")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return e.code or 0
    cache = default_cache()
    if args.cmd in (None, "info"):
        i = cache.info()
        print(f"location:   {i['location']}")
        print(f"enabled:    {'yes' if i['enabled'] else 'no (JITGRAD_CACHE=0)'}")
        print(f"mode:       {i['mode']}" + (f"  ({i['problem']})" if i["problem"] else ""))
        print(f"entries:    {i['entries']}")
        print(f"bytes:      {i['bytes']} ({_human(i['bytes'])})")
        print(f"limit:      {i['max_bytes']} ({_human(i['max_bytes'])})")
        print(f"format:     {i['format_version']}")
        print("hits/misses: per process; see jitgrad.cache_info() inside a program")
        return 0
    if args.cmd == "clear":
        n = cache.clear()
        print(f"removed {n} entries from {cache.directory}")
        return 0
    if args.cmd == "prune":
        before = cache.info()
        n = cache.prune(args.max_bytes)
        after = cache.info()
        limit = cache.max_bytes if args.max_bytes is None else args.max_bytes
        print(f"removed {n} entries; {after['entries']} entries, {after['bytes']} bytes remain "
              f"(was {before['bytes']}; limit {limit})")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
