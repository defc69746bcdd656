#!/usr/bin/env python3
"""Check every entry of a result cache the way a run reads it, and say which would be refused.

    python3 benchmarks/cache_check.py CACHE_DIR [--json OUT.json]

Each `<key[:2]>/<key>.json` under CACHE_DIR is read as the run reads it (`run/cache.py` read_entry:
never through a link, only a regular file) and checked with `entry_problem` against the key its
name gives. Prints one line per bad entry and a closing `N entries, N valid, N invalid` line; exit 0
when every entry is valid, 1 when some is not, 2 when CACHE_DIR is no folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

from benchmark_model_kernels.run.cache import entry_problem, read_entry  # noqa: E402


def check(folder: str) -> dict[str, object]:
    entries, bad = 0, []
    for sub in sorted(os.listdir(folder)):
        path = os.path.join(folder, sub)
        if len(sub) != 2 or not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith(".json"):
                continue
            entries += 1
            key = name[: -len(".json")]
            try:
                problem = entry_problem(read_entry(os.path.join(path, name)), key)
            except (OSError, ValueError) as exc:
                problem = f"cannot be read: {exc}"
            if problem or not key.startswith(sub):
                bad.append({"entry": f"{sub}/{name}", "problem": problem or "filed under another prefix"})
    return {"folder": folder, "entries": entries, "valid": entries - len(bad), "invalid": bad}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cache", help="the result cache folder, e.g. ~/.cache/benchmark-model-kernels/results")
    p.add_argument("--json", help="also write the record to this file, e.g. --json cache_check.json")
    args = p.parse_args(argv)
    if not os.path.isdir(args.cache):
        print(f"error: {args.cache} is not a folder (give the --cache folder of the runs)", file=sys.stderr)
        return 2
    record = check(args.cache)
    for item in record["invalid"]:  # type: ignore[union-attr]
        print(f"invalid {item['entry']}: {item['problem']}")
    print(f"{record['entries']} entries, {record['valid']} valid, {len(record['invalid'])} invalid")  # type: ignore[arg-type]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0 if not record["invalid"] else 1


if __name__ == "__main__":
    sys.exit(main())
