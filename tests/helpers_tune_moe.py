"""What the scripts/tune_moe.py tests share: a stand-in for the kernel's timings (plumbing only: a
bowl whose minimum, `optimum`, is known) and one run of the tool into a tmp folder."""

from __future__ import annotations

import io
import os

from benchmark_model_kernels.run import tune_moe as tm
from benchmark_model_kernels.vllm_rules.moe_config_files import TILE_KEYS, TUNER_RANGES

H200 = "NVIDIA H200"


def optimum(num_tokens: int) -> dict[str, int]:
    """The stand-in kernel's fastest tiles at a token count (each in every scheme's space)."""
    bm = 16 if num_tokens <= 8 else 32 if num_tokens <= 64 else 64
    return dict(zip(TILE_KEYS, (bm, 64, 128, 1 if num_tokens < 1024 else 16, 4, 3), strict=True))


class StandIn:
    """KeyBench stand-in: separable timings with their minimum at `optimum`; counts what it is asked."""

    made: list[int] = []
    measured: list[int] = []
    fail_at: set[int] = set()

    def __init__(self, p, settings):
        if p.num_tokens in self.fail_at:
            raise RuntimeError(f"out of memory at {p.num_tokens} tokens")
        self.best = optimum(p.num_tokens)
        StandIn.made.append(p.num_tokens)

    def us(self, c):
        steps = 0
        for k in TILE_KEYS:
            values = sorted(set(TUNER_RANGES[k]) | {c[k], self.best[k]})
            steps += abs(values.index(c[k]) - values.index(self.best[k]))
        return 10.0 + steps

    def measure(self, configs):
        StandIn.measured.extend([1] * len(configs))
        return [(c, self.us(c)) for c in configs]

    def time(self, c):
        return self.us(c), "cupti"

    def check(self, c):
        return "passed"


GPU = tm.Gpu(H200, "3.5.0", StandIn)


def tune(tmp_path, *argv: str, out: str = "out") -> tuple[int, str, str]:
    args = [*argv, "--out", str(tmp_path / out), "--tile_cache", str(tmp_path / "tiles")]
    req = tm.request_from_args(tm.build_parser().parse_args(args), args)
    err, stdout = io.StringIO(), io.StringIO()
    rc = tm.run_tune(req, GPU, err=err, out=stdout)
    return rc, err.getvalue(), stdout.getvalue()


def vllm_files(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("E="))
