"""The tile search behind vLLM's tuned MoE files (kernels/moe_tuning.py), with stand-in timings: the
space, the descent and full searches, and one key's three timings. The kernel itself is timed by
the GPU tests of kernels/triton_moe."""

from __future__ import annotations

import pytest

from benchmark_model_kernels.kernels import moe_tuning as mt
from benchmark_model_kernels.kernels.triton_moe.problem import MoeProblem
from benchmark_model_kernels.vllm_rules.moe_config_files import TILE_KEYS, TUNER_RANGES, default_config


def tiles(*values: int) -> dict[str, int]:
    return dict(zip(TILE_KEYS, values, strict=True))


class Bowl:
    """Stand-in timings, separable with one minimum: the distance in range steps from `best`, per key."""

    def __init__(self, best: dict[str, int], broken: tuple[int, ...] = ()):
        self.best, self.broken, self.timed = best, broken, []

    def us(self, c: dict[str, int]) -> float:
        steps = 0.0
        for k in TILE_KEYS:
            values = sorted(set(TUNER_RANGES[k]) | {c[k], self.best[k]})
            steps += abs(values.index(c[k]) - values.index(self.best[k]))
        return 10.0 + steps

    def measure(self, configs):
        self.timed += configs
        return [(c, self.us(c)) for c in configs if c["BLOCK_SIZE_M"] not in self.broken]

    def time(self, config):
        return self.us(config), "cupti"

    def check(self, config):
        return "passed"


def problem(scheme: str = "bf16", num_tokens: int = 4, block_size: int = 128) -> MoeProblem:
    """One EP rank of Qwen3-30B-A3B at EP=8."""
    return MoeProblem(num_tokens=num_tokens, hidden=2048, intermediate=768, local_experts=16, global_experts=128,
                      top_k=8, activation="silu_and_mul", gated=True, scheme=scheme, block_size=block_size)


BF16, BLOCK = problem(), problem("fp8_block128")


def test_kernel_space_is_vllms_ranges_less_what_the_kernel_cannot_run():
    bf16 = mt.kernel_space(BF16)
    assert bf16 and all(not mt.fits_kernel(c, BF16) for c in bf16)
    assert len(bf16) < 1920  # the shared-memory budget drops the biggest pipelines
    assert tiles(256, 256, 256, 1, 8, 5) not in bf16
    block = mt.kernel_space(BLOCK)
    assert {c["BLOCK_SIZE_K"] for c in block} == {64, 128}  # dividing the 128 block, as vLLM's launch clamps it
    assert "BLOCK_SIZE_K=256" in mt.fits_kernel(tiles(16, 128, 256, 1, 4, 3), BLOCK)
    assert {c["BLOCK_SIZE_K"] for c in mt.kernel_space(problem("fp8_block128", block_size=64))} == {64}
    assert "KiB of shared memory" in mt.fits_kernel(tiles(256, 256, 256, 1, 8, 5), BF16)
    assert len(mt.kernel_space(problem("fp8_per_tensor"))) > len(bf16)  # FP8 tiles are half the bytes


def test_descent_finds_the_minimum_from_vllms_default():
    best = tiles(64, 128, 64, 16, 8, 4)
    bench = Bowl(best)
    found = mt.descent_search([default_config(1, 16, 768, 2048, 8, None)], mt.kernel_space(BF16), bench.measure)
    assert found.best == best and found.best_us == 10.0
    assert found.timed == len({tuple(c.values()) for c in bench.timed}) <= mt.DESCENT_MAX_CONFIGS


def test_descent_times_each_config_once_and_starts_from_the_fastest_seed():
    best = tiles(16, 64, 128, 1, 4, 3)
    bench = Bowl(best)
    found = mt.descent_search([tiles(128, 256, 64, 16, 8, 4), best], mt.kernel_space(BF16), bench.measure)
    assert found.best == best
    idents = [tuple(c.values()) for c in bench.timed]
    assert len(idents) == len(set(idents))
    space = mt.kernel_space(BF16)
    neighbours = [{**best, k: v} for k in mt.DESCENT_AXES for v in TUNER_RANGES[k] if v != best[k]]
    assert found.timed == 2 + sum(1 for c in neighbours if c in space)  # one pass: nothing moved


def test_descent_leaves_a_seed_outside_the_space():
    best = tiles(16, 128, 128, 1, 4, 3)
    found = mt.descent_search([tiles(16, 64, 128, 1, 4, 4)], mt.kernel_space(BLOCK), Bowl(best).measure)
    assert found.best == best


def test_descent_without_a_seed_that_runs_starts_in_the_space():
    bench = Bowl(tiles(32, 64, 128, 1, 4, 3), broken=(16,))
    found = mt.descent_search([tiles(16, 64, 128, 1, 4, 3)], mt.kernel_space(BF16), bench.measure)
    assert found.best == tiles(32, 64, 128, 1, 4, 3)
    with pytest.raises(RuntimeError, match="no config ran"):
        mt.descent_search([tiles(16, 64, 128, 1, 4, 3)], mt.kernel_space(BF16), lambda configs: [])


def test_full_search_times_the_whole_space():
    best = tiles(128, 128, 64, 1, 8, 3)
    bench = Bowl(best)
    space = mt.kernel_space(BF16)
    found = mt.search("full", [best], space, bench.measure)
    assert found.best == best and found.timed == len(space)
    assert mt.configs_per_key("full", BF16) == len(space) + 3
    with pytest.raises(ValueError, match="search='grid'"):
        mt.search("grid", [best], space, bench.measure)


def test_tune_key_times_tuned_shipped_and_default_once_each():
    best = tiles(16, 128, 128, 1, 4, 3)
    bench = Bowl(best)
    calls = []
    bench.time = lambda c: (calls.append(c), (bench.us(c), "cupti"))[1]
    shipped = tiles(16, 128, 256, 1, 4, 3)  # BLOCK_SIZE_K 256 over the 128 block: this kernel refuses it
    default = default_config(4, 16, 768, 2048, 8, "fp8_w8a8", (128, 128))
    timing, found = mt.tune_key(mt.KeyRequest(BLOCK, default, shipped), bench)
    assert found == best and timing.tuned.median_us == 10.0 and timing.timer == "cupti"
    assert timing.default.median_us == bench.us(default) and timing.default.config == default
    assert timing.shipped.median_us is None and "BLOCK_SIZE_K=256" in timing.shipped.reason
    assert timing.searched > 0 and timing.check == "passed"
    assert calls == [best, default]


def test_tune_key_keeps_vllms_own_tiles_where_the_final_timing_puts_them_ahead():
    best = tiles(16, 128, 128, 1, 4, 3)
    bench = Bowl(best)
    default = default_config(4, 16, 768, 2048, 8, "fp8_w8a8", (128, 128))
    # the search's pick times slower than vLLM's default in the final timing (short search timings)
    bench.time = lambda c: (5.0 if c == default else bench.us(c), "cupti")
    timing, found = mt.tune_key(mt.KeyRequest(BLOCK, default, None), bench)
    assert found == default and timing.tuned.config == default and timing.tuned.median_us == 5.0
    assert timing.default.median_us == 5.0 and timing.check == "passed"


def test_tune_key_with_cached_tiles_does_not_search_and_shares_a_timing():
    bench = Bowl(tiles(16, 128, 128, 1, 4, 3))
    default = default_config(16, 16, 768, 2048, 8, "fp8_w8a8", (128, 128))
    timing, found = mt.tune_key(mt.KeyRequest(problem("fp8_block128", 16), default, None, cached=default), bench)
    assert found == default and timing.searched == 0 and not bench.timed
    assert timing.tuned.median_us == timing.default.median_us
    assert timing.shipped.reason == "vLLM ships no file for this shape"


def test_tune_key_reports_a_final_timing_that_fails():
    bench = Bowl(tiles(16, 128, 128, 1, 4, 3))

    def fail(config):
        raise RuntimeError("out of resources")

    bench.time = fail
    default = default_config(16, 16, 768, 2048, 8, "fp8_w8a8", (128, 128))
    timing, _ = mt.tune_key(mt.KeyRequest(problem("fp8_block128", 16), default, None, cached=default), bench)
    assert timing.tuned.median_us is None and "out of resources" in timing.tuned.reason
    assert timing.check == ""


def test_cache_key_names_the_shape_and_digests_everything_the_tiles_depend_on():
    key = mt.cache_key(problem("fp8_block128", 64), "descent", "NVIDIA H200", "3.5.0")
    assert key.startswith("vllm_moe_file-NVIDIA_H200-fp8_block128-E16-N768-tokens64-")
    others = {mt.cache_key(problem("fp8_block128", 64, block_size=64), "descent", "NVIDIA H200", "3.5.0"),
              mt.cache_key(problem("fp8_block128", 64), "full", "NVIDIA H200", "3.5.0"),
              mt.cache_key(problem("fp8_block128", 64), "descent", "NVIDIA H100", "3.5.0"),
              mt.cache_key(problem("fp8_block128", 64), "descent", "NVIDIA H200", "3.6.0")}
    assert key not in others and len(others) == 4 and len(key) < 200
