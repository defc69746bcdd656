"""vllm_rules/block_fp8_gemm.py against vLLM 0.33.0's own `w8a8_triton_block_scaled_mm`: the carried
tables, and the tiles it launches its kernel with for every dense GEMM of the bundled models at the
usual TP sizes, on the GPUs vLLM ships tables for and one without any. The kernel launch is caught
(no GPU needed), so the config is the one vLLM's own code picks. Needs vLLM importable (CPU is
enough):

    PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python -m pytest -m vllm \\
        tests/vllm_rules/test_block_fp8_gemm_vllm.py
"""

from __future__ import annotations

import os

import pytest

from benchmark_model_kernels.crosscheck.vllm_build import vllm_available
from benchmark_model_kernels.vllm_rules import block_fp8_gemm as bg

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not vllm_available(), reason="vLLM not importable (pip install vllm==0.33.0)")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ("deepseek-v3", "kimi-k2", "llama-3.1-8b", "qwen3-30b-a3b", "qwen3-8b")
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA B200", "NVIDIA L40S")
MS = (1, 3, 8, 20, 64, 100, 512, 1000, 4096)


def _fp8_utils():
    import vllm.model_executor.layers.quantization.utils.fp8_utils as fp8_utils

    return fp8_utils


def test_carried_tables_are_the_installed_vllms(tile_tables_script):
    version, tables = tile_tables_script.shipped_tables("block_fp8")
    with open(bg._TABLES, encoding="utf-8") as f:
        assert f.read() == tile_tables_script.render(version, tables, "block_fp8"), \
            "run benchmarks/vllm_tile_tables.py"


@pytest.fixture
def launched(monkeypatch, vllm_device):
    """Set the device name vLLM's platform reports and catch the kernel launch: (set_name, run(m, n, k)
    -> the meta-parameters vLLM launched `_w8a8_triton_block_scaled_mm` with)."""
    import torch

    fp8_utils = _fp8_utils()
    seen: list[dict] = []

    class Catch:
        def __getitem__(self, grid):
            return lambda *args, **meta: seen.append(meta)

    monkeypatch.setattr(fp8_utils, "_w8a8_triton_block_scaled_mm", Catch())

    def set_name(name: str) -> None:
        vllm_device(name, fp8_utils.get_w8a8_block_fp8_configs)

    def run(m: int, n: int, k: int) -> dict:
        a = torch.empty(m, k, dtype=torch.float8_e4m3fn)
        b = torch.empty(n, k, dtype=torch.float8_e4m3fn)
        a_s = torch.empty(m, -(-k // 128), dtype=torch.float32)
        b_s = torch.empty(-(-n // 128), -(-k // 128), dtype=torch.float32)
        seen.clear()
        fp8_utils.w8a8_triton_block_scaled_mm(a, b, a_s, b_s, [128, 128], torch.bfloat16)
        (meta,) = seen
        return {key: meta[key] for key in bg.CONFIG_KEYS}

    return set_name, run


def test_tiles_are_the_ones_vllm_launches(launched):
    from benchmark_model_kernels.plan import planner

    set_name, run = launched
    shapes = {(g.n, g.k) for model in MODELS for tp in (1, 2, 4, 8)
              for g in planner.plan_model(model, tp, 1).gemms if g.k % 128 == 0}
    shipped = 0
    for device in DEVICES:
        set_name(device)
        for n, k in sorted(shapes):
            for m in MS:
                ours = bg.vllm_tiles(m, n, k, device)
                assert ours.config == run(m, n, k), (device, m, n, k, ours.describe())
                shipped += ours.m_key is not None
    assert shipped > 50  # DeepSeek-V3's and Kimi-K2's H100/H200/B200 tables are found, not only defaults
