#!/usr/bin/env python3
"""How long scripts/tune_moe.py takes to tune one fused-MoE shape at 8 keys on this GPU, and where
the time goes; the target is at most 3 minutes on an H200.

One shape (default: Qwen3-30B-A3B at TP=1, BF16, E=128 N=768) at 8 of vLLM's tuner keys, tuned
from nothing: a fresh tile cache, a fresh --out and, unless --warm, a fresh Triton kernel cache
(TRITON_CACHE_DIR), so every candidate is compiled. The tool runs in this process with its own
Triton KeyBench, each call of which is timed: building a key's inputs, the search (compiles and
10-iteration timings), the three final timings (tuned, shipped, default) and the correctness check.
Prints one line per key and a summary: total wall time, configs searched, seconds per searched
config and per final timing (what run/tune_moe.py's estimate assumes), and writes it all to
--out/speed.json beside the tool's own files.

    python3 benchmarks/tune_moe_speed.py [--model qwen3-30b-a3b --tp 1 --ep 1 --scheme bf16]
        [--keys 1 8 16 64 256 1024 2048 4096] [--search descent] [--out DIR] [--target_s 180] [--warm]

Exit status: 0 within the target, 1 over it (or a key failed), 2 bad input.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from benchmark_model_kernels.core.errors import OneLineArgumentParser, cli_main  # noqa: E402
from benchmark_model_kernels.core.files import write_json_atomic  # noqa: E402

DEFAULT_KEYS = (1, 8, 16, 64, 256, 1024, 2048, 4096)


class TimedBench:
    """A KeyBench that adds the wall time of each of its calls to `seconds` by phase."""

    def __init__(self, inner, seconds: dict, counts: dict):
        self.inner, self.seconds, self.counts = inner, seconds, counts

    def _timed(self, phase: str, fn, *args):
        import torch

        t0 = time.monotonic()
        try:
            return fn(*args)
        finally:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - t0

    def measure(self, configs):
        self.counts["searched"] = self.counts.get("searched", 0) + len(configs)
        return self._timed("search", self.inner.measure, configs)

    def time(self, config):
        self.counts["timings"] = self.counts.get("timings", 0) + 1
        return self._timed("final", self.inner.time, config)

    def check(self, config):
        return self._timed("check", self.inner.check, config)


def main(argv: list[str] | None = None) -> int:
    p = OneLineArgumentParser(prog="tune_moe_speed.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen3-30b-a3b")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--scheme", default="bf16", help="one scheme, e.g. --scheme fp8_block128")
    p.add_argument("--keys", type=int, nargs="+", default=list(DEFAULT_KEYS))
    p.add_argument("--search", default="descent")
    p.add_argument("--out", help="folder of the tool's files and speed.json (default: a new temporary one)")
    p.add_argument("--target_s", type=float, default=180.0, help="the budget for the whole shape (default 180)")
    p.add_argument("--warm", action="store_true", help="keep Triton's kernel cache (a second run's speed)")
    args = p.parse_args(argv)

    def run() -> int:
        out = args.out or tempfile.mkdtemp(prefix="tune_moe_speed.")
        os.makedirs(out, exist_ok=True)
        if not args.warm:
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton_cache.")  # before Triton loads
        from benchmark_model_kernels.kernels import moe_tuning as mt
        from benchmark_model_kernels.run import tune_moe as tm

        gpu = tm.real_gpu()
        seconds: dict[str, float] = {}
        counts: dict[str, int] = {}

        def bench(problem, settings):
            t0 = time.monotonic()
            inner = mt.TritonKeyBench(problem, settings)
            seconds["inputs"] = seconds.get("inputs", 0.0) + time.monotonic() - t0
            return TimedBench(inner, seconds, counts)

        tiles = tempfile.mkdtemp(prefix="tiles.")
        argv_tool = [args.model, "--tp", str(args.tp), "--ep", str(args.ep), "--schemes", args.scheme,
                     "--keys", *map(str, args.keys), "--search", args.search, "--out", out, "--tile_cache", tiles]
        req = tm.request_from_args(tm.build_parser().parse_args(argv_tool), argv_tool)
        t0 = time.monotonic()
        rc = tm.run_tune(req, tm.Gpu(gpu.name, gpu.triton_version, bench))
        wall = time.monotonic() - t0
        searched, timings = counts.get("searched", 0), counts.get("timings", 0)
        summary = {"gpu": gpu.name, "triton": gpu.triton_version, "model": args.model, "tp": args.tp, "ep": args.ep,
                   "scheme": args.scheme, "keys": args.keys, "search": args.search, "warm_triton_cache": args.warm,
                   "wall_s": round(wall, 1), "target_s": args.target_s, "within_target": wall <= args.target_s,
                   "seconds_by_phase": {k: round(v, 1) for k, v in seconds.items()},
                   "configs_searched": searched, "final_timings": timings,
                   "s_per_searched_config": round(seconds.get("search", 0.0) / searched, 3) if searched else None,
                   "s_per_final_timing": round(seconds.get("final", 0.0) / timings, 3) if timings else None,
                   "tool_rc": rc}
        write_json_atomic(os.path.join(out, "speed.json"), summary)
        print(json.dumps(summary, indent=1))
        print(f"{'within' if wall <= args.target_s else 'OVER'} the {args.target_s:.0f} s target: {wall:.0f} s for "
              f"{len(args.keys)} keys ({searched} configs searched) on {gpu.name}; files and tune_moe.md in {out}")
        return 0 if wall <= args.target_s and rc == 0 else 1

    return cli_main(run)


if __name__ == "__main__":
    sys.exit(main())
