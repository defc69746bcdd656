#!/usr/bin/env python3
"""Preview speed target: `benchmark_model.py MODEL --tp 8 --print_only` for the largest configs
(DeepSeek-V3, Kimi-K2) must take < 3 s wall including imports, with < 1 GB peak memory, on a 2-core
CPU machine. Each run is a fresh subprocess (measured with os.wait4); prints the numbers and exits 1
when the median wall time or the peak memory is over target.

    python benchmarks/preview_speed.py [--runs 3] [--models deepseek-v3,kimi-k2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "benchmark_model.py")
WALL_TARGET_S = 3.0
PEAK_TARGET_MB = 1024.0


def measure(model: str, tp: int, ep: int) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MB, exit code) of one fresh preview process."""
    cmd = [sys.executable, SCRIPT, model, "--tp", str(tp), "--ep", str(ep), "--print_only"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per model, e.g. --runs 5 (median is judged)")
    ap.add_argument("--models", default="deepseek-v3,kimi-k2",
                    help="comma-separated MODEL arguments, e.g. --models deepseek-v3,../shared/configs/glm-5.1")
    ap.add_argument("--tp", type=int, default=8, help="tensor parallel size of the preview, e.g. --tp 8")
    ap.add_argument("--ep", type=int, default=8, help="expert parallel size of the preview, e.g. --ep 8")
    args = ap.parse_args(argv)
    failed = False
    print(f"{'model':<28} {'median s':>8} {'max s':>7} {'peak MB':>8}  "
          f"target: < {WALL_TARGET_S} s, < {PEAK_TARGET_MB:.0f} MB")
    for model in args.models.split(","):
        runs = [measure(model, args.tp, args.ep) for _ in range(args.runs)]
        walls = [r[0] for r in runs]
        peak = max(r[1] for r in runs)
        rcs = {r[2] for r in runs}
        med = statistics.median(walls)
        over = med >= WALL_TARGET_S or peak >= PEAK_TARGET_MB or rcs != {0}
        failed |= over
        print(f"{model:<28} {med:8.2f} {max(walls):7.2f} {peak:8.0f}  {'OVER TARGET' if over else 'ok'}"
              + (f" (exit codes {sorted(rcs)})" if rcs != {0} else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
