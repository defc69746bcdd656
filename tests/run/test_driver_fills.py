"""The attention driver's K/V draws made on the GPU (run/driver_fills.py): which torch calls are
routed, that everything else is torch's own call byte for byte, that the routine module gets its
torch back however the block ends, and how the request, the case log and the row say so.

On a CPU the routed device is torch's "meta" device (a real device that holds no data), so a draw
of any size can be routed and seen to land there; the CUDA path is the gpu-marked test at the end.
The module standing in for benchmarks/routines/attention.py fills as the driver does at
release-v0.6.18 (attention.py:789 and :1514)."""

from __future__ import annotations

import argparse
import sys
import threading
import types

import pytest
import torch

from benchmark_model_kernels.cases.attention import AttentionSweep, attention_cases
from benchmark_model_kernels.core.plan_schema import AttentionEntry, ModelInfo, Plan
from benchmark_model_kernels.core.results_schema import RunSettings, timing_settings
from benchmark_model_kernels.run import driver_fills, flags
from benchmark_model_kernels.run.case_execution import CaseExecutor
from benchmark_model_kernels.run.driver_fills import GPU_FILL_MIN_NUMEL, draw_shape, gpu_fills, routed_shape
from benchmark_model_kernels.run.outcome import WorkerReply, classify_driver_case
from helpers_runner import FAKE_REPO, gemm_case, run_request
from support import requires_gpu

BIG = (4096, 2, 8, 16, 128)  # 134 M elements: Llama-3.1-8B decode at M=64 over 1024 tokens
SMALL = (64, 2, 8, 16, 128)  # 2 M elements: M=1 over 1024 tokens

DRIVER_LIKE = '''
def fill_kv(kv_cache_shape, kv_init_dtype, device):
    kv_cache = torch.randn(size=kv_cache_shape, dtype=kv_init_dtype).to(device)
    return kv_cache

def fill_q(shape, device):
    return torch.rand(*shape, device=device, dtype=torch.bfloat16)

def fails_after_filling(kv_cache_shape, device):
    torch.randn(size=kv_cache_shape, dtype=torch.bfloat16).to(device)
    raise RuntimeError("the routine failed after its fill")
'''


@pytest.fixture
def routines(monkeypatch):
    """A module named like the driver's attention routines, with its own `torch`."""
    module = types.ModuleType("routines_attention_stand_in")
    module.torch = torch
    exec(DRIVER_LIKE, module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def on_meta(module, min_numel=GPU_FILL_MIN_NUMEL):
    return gpu_fills(min_numel, device=torch.device("meta"), module_name=module.__name__)


# ------------------------------------------------------------------ which calls are routed
def test_the_shape_is_read_from_every_way_torch_takes_it():
    assert draw_shape((), {"size": BIG}) == BIG
    assert draw_shape((BIG,), {}) == BIG
    assert draw_shape((torch.Size(BIG),), {}) == BIG
    assert draw_shape(BIG, {}) == BIG
    assert draw_shape((7,), {}) == (7,)
    assert draw_shape((torch.tensor(5), 3), {}) == (5, 3)  # a 0-d count, as the prefill routine passes
    assert draw_shape((2.5,), {}) is None and draw_shape((3,), {"size": (3,)}) is None


@pytest.mark.parametrize("kwargs", [
    {"device": "cuda"}, {"device": torch.device("cpu")}, {"out": torch.empty(0)},
    {"generator": torch.Generator()}, {"pin_memory": True}, {"layout": torch.sparse_coo},
])
def test_a_large_draw_that_names_a_device_output_generator_or_layout_is_left_alone(kwargs):
    assert routed_shape((), {"size": BIG, **kwargs}, GPU_FILL_MIN_NUMEL) is None


def test_only_large_device_less_draws_on_a_cpu_default_device_are_routed():
    assert routed_shape((), {"size": BIG, "dtype": torch.bfloat16}, GPU_FILL_MIN_NUMEL) == BIG
    assert routed_shape((), {"size": BIG, "device": None, "layout": torch.strided}, GPU_FILL_MIN_NUMEL) == BIG
    assert routed_shape((), {"size": SMALL}, GPU_FILL_MIN_NUMEL) is None
    assert routed_shape((GPU_FILL_MIN_NUMEL,), {}, GPU_FILL_MIN_NUMEL) == (GPU_FILL_MIN_NUMEL,)
    assert routed_shape((GPU_FILL_MIN_NUMEL - 1,), {}, GPU_FILL_MIN_NUMEL) is None
    # torch.set_default_device already sends a device-less draw elsewhere: not this tool's to move.
    assert routed_shape((), {"size": BIG}, GPU_FILL_MIN_NUMEL, default_device="cuda") is None


# ------------------------------------------------------------------ the module's torch, in and out
def test_a_large_fill_lands_on_the_device_and_small_or_placed_draws_are_the_drivers_own(routines, capsys):
    torch.manual_seed(42)
    expected_small = torch.randn(size=SMALL, dtype=torch.bfloat16)
    expected_q = torch.rand(*SMALL[:3], device="cpu", dtype=torch.bfloat16)
    torch.manual_seed(42)
    with on_meta(routines) as fills:
        assert routines.torch is not torch
        big = routines.fill_kv(BIG, torch.bfloat16, torch.device("meta"))
        small = routines.fill_kv(SMALL, torch.bfloat16, torch.device("cpu"))
        q = routines.fill_q(SMALL[:3], "cpu")
        assert routines.torch.float8_e4m3fn is torch.float8_e4m3fn  # every other name is torch's
    assert routines.torch is torch
    assert big.device.type == "meta" and big.shape == BIG and big.dtype == torch.bfloat16
    # The large draw left the CPU generator alone: the small one is the driver's, byte for byte.
    assert torch.equal(small, expected_small) and torch.equal(q, expected_q)
    assert [(f.function, f.shape, f.dtype, f.device) for f in fills] == [("randn", BIG, "torch.bfloat16", "meta")]
    assert fills[0].numel == 4096 * 2 * 8 * 16 * 128
    line = capsys.readouterr().out.strip()
    assert line == driver_fills.fill_log_line(fills[0])
    assert line.startswith("[bmk-worker] K/V filled on the GPU: torch.randn((4096, 2, 8, 16, 128), torch.bfloat16)")


def test_the_module_gets_its_torch_back_after_an_exception(routines):
    with pytest.raises(RuntimeError, match="after its fill"):
        with on_meta(routines) as fills:
            routines.fails_after_filling(BIG, torch.device("meta"))
    assert routines.torch is torch and len(fills) == 1
    assert routines.fill_kv(SMALL, torch.bfloat16, "cpu").device.type == "cpu"


def test_nested_blocks_restore_in_order_and_route_once(routines):
    with on_meta(routines) as outer:
        stand_in = routines.torch
        with on_meta(routines) as inner:  # the module's torch is replaced already: left as it is
            assert routines.torch is stand_in
            routines.fill_kv(BIG, torch.bfloat16, "meta")
        assert routines.torch is stand_in
    assert routines.torch is torch and len(outer) == 1 and inner == []


def test_two_threads_never_leave_the_module_with_a_replaced_torch(routines):
    errors: list[BaseException] = []

    def worker():
        try:
            for _ in range(20):
                with on_meta(routines):
                    routines.fill_kv(BIG, torch.bfloat16, "meta")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and routines.torch is torch


def test_no_module_or_no_cuda_means_the_drivers_own_fill(routines, monkeypatch):
    with gpu_fills(module_name="no_such_routines_module") as fills:
        assert fills == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with gpu_fills(module_name=routines.__name__) as fills:
        assert routines.torch is torch  # no CUDA device: nothing replaced
        routines.fill_kv(SMALL, torch.bfloat16, "cpu")
    assert fills == []


# ------------------------------------------------------------------ request, flag, row
LLAMA = AttentionEntry(name="attn", modules=("model.layers.*.self_attn.attn",), kind="mha", layers=32,
                       num_q_heads=32, num_kv_heads=8, head_dim_qk=128, head_dim_vo=128,
                       total_q_heads=32, total_kv_heads=8)
INFO = ModelInfo(name="m", source="bundled", model_type="llama", architecture="LlamaForCausalLM")


def decode_case():
    cases = attention_cases(Plan(model=INFO, tp=1, ep=1, attention=(LLAMA,)), [8],
                            AttentionSweep(kv_lens=(32768,), kv_dtypes=("bf16",)), compute_capability=(9, 0))
    return next(c for c in cases if c.backend == "fa2_tc")


def test_attention_driver_cases_ask_the_worker_for_gpu_fills_unless_told_cpu(tmp_path):
    def request(case, **kw):
        executor = CaseExecutor(run_request([case], str(tmp_path), RunSettings(**kw), repo=FAKE_REPO), {})
        return executor.worker_request(case, case.job)[0]

    assert request(decode_case())["gpu_fill_min_numel"] == GPU_FILL_MIN_NUMEL
    assert "gpu_fill_min_numel" not in request(decode_case(), attention_fill="cpu")
    assert "gpu_fill_min_numel" not in request(gemm_case(4096))


def test_the_flag_sets_the_fill_and_the_fill_is_no_part_of_a_cache_key():
    parser = argparse.ArgumentParser()
    flags.add_run_arguments(parser)
    args = parser.parse_args(["--attention_cpu_fill"])
    assert flags.settings_from_args(args, "/tmp/w").attention_fill == "cpu"
    assert flags.settings_from_args(parser.parse_args([]), "/tmp/w").attention_fill == "gpu"
    assert timing_settings(RunSettings(attention_fill="cpu")) == timing_settings(RunSettings())


CSV_ROW = {"routine": "BatchDecodeWithPagedKVCacheWrapper", "median_time": "0.0421", "std_time": "0.0004",
           "backend": "fa2_tc"}


def test_the_ok_row_says_its_kv_was_filled_on_the_gpu():
    fill = driver_fills.DeviceFill("randn", (16384, 2, 8, 16, 128), "torch.bfloat16", "cuda:0")
    answer = {"bench_calls": [], "gpu_fills": [fill.to_json()]}
    out = classify_driver_case("", [CSV_ROW], WorkerReply(answer), RunSettings(), "fa2_tc",
                               "BatchDecodeWithPagedKVCacheWrapper")
    assert out.status == "ok" and out.reason.startswith("K/V filled on the GPU (the driver's torch.randn, 537 M")
    plain = classify_driver_case("", [CSV_ROW], WorkerReply({"bench_calls": []}), RunSettings(), "fa2_tc",
                                 "BatchDecodeWithPagedKVCacheWrapper")
    assert "K/V" not in plain.reason


# ------------------------------------------------------------------ the CUDA path
@pytest.mark.gpu
@requires_gpu
def test_on_cuda_the_fill_is_drawn_there_and_the_drivers_copy_is_a_no_op(routines):
    device = torch.device("cuda")  # the driver's get_device
    with gpu_fills(module_name=routines.__name__) as fills:
        torch.manual_seed(42)
        kv = routines.fill_kv(BIG, torch.bfloat16, device)
    assert kv.is_cuda and kv.to(device).data_ptr() == kv.data_ptr()
    assert fills[0].device == f"cuda:{torch.cuda.current_device()}"
    # Same distribution as the driver's CPU draw: a standard normal, rounded to BF16.
    mean, std = kv.float().mean().item(), kv.float().std().item()
    assert abs(mean) < 1e-3 and abs(std - 1.0) < 1e-3
    torch.manual_seed(42)
    with gpu_fills(module_name=routines.__name__):
        again = routines.fill_kv(BIG, torch.bfloat16, device)
    assert torch.equal(kv, again)  # seeded as the driver seeds: the same values every run


STAND_IN_DRIVER = '''
import argparse
from routines.flashinfer_benchmark_utils import full_output_columns
from routines import attention

def parse_args(line):
    p = argparse.ArgumentParser()
    p.add_argument("--routine")
    p.add_argument("--batch_size", type=int)
    p.add_argument("--output_path")
    return p.parse_known_args(line)[0]

def run_test(args):
    attention.run(args)
'''
STAND_IN_ATTENTION = '''
import torch

def run(args):
    device = torch.device("cuda")  # the driver's get_device
    kv_cache = torch.randn(size=(args.batch_size, 2, 8, 16, 128), dtype=torch.bfloat16).to(device)
    print(f"[STAND-IN] kv_cache on {kv_cache.device}")
    with open(args.output_path, "a") as f:
        f.write("BatchDecodeWithPagedKVCacheWrapper,0.04,0.001,fa2_tc\\n")
'''


@pytest.mark.gpu
@requires_gpu
def test_the_worker_fills_on_the_gpu_when_asked_and_says_so_in_the_log_and_answer(tmp_path):
    from benchmark_model_kernels.run.pool import WorkerPool

    routines_dir = tmp_path / "repo" / "benchmarks" / "routines"
    routines_dir.mkdir(parents=True)
    (routines_dir / "__init__.py").write_text("")
    (routines_dir / "flashinfer_benchmark_utils.py").write_text(
        'full_output_columns = ["routine", "median_time", "std_time", "backend"]\n')
    (routines_dir / "attention.py").write_text(STAND_IN_ATTENTION)
    (routines_dir.parent / "flashinfer_benchmark.py").write_text(STAND_IN_DRIVER)
    pool = WorkerPool(str(tmp_path / "repo"), str(tmp_path / "worker.log"))
    try:
        for name, batch, extra in (("gpu", 4096, {"gpu_fill_min_numel": GPU_FILL_MIN_NUMEL}),
                                   ("cpu", 4096, {}), ("small", 64, {"gpu_fill_min_numel": GPU_FILL_MIN_NUMEL})):
            log = tmp_path / f"{name}.log"
            req = {"job": "driver", "case_id": name, "log_path": str(log), "csv_path": str(tmp_path / f"{name}.csv"),
                   "argv": ["--routine", "BatchDecodeWithPagedKVCacheWrapper", "--batch_size", str(batch)],
                   "settings": {}, **extra}
            reply = pool.run(req, 120.0)
            text = log.read_text()
            assert "[STAND-IN] kv_cache on cuda:0" in text, text
            if name == "gpu":
                assert reply.answer["gpu_fills"][0]["shape"] == [4096, 2, 8, 16, 128]
                assert "[bmk-worker] K/V filled on the GPU: torch.randn((4096, 2, 8, 16, 128)" in text
            else:  # the driver's own fill: not asked for, or below the threshold
                assert "gpu_fills" not in reply.answer and "K/V filled" not in text
    finally:
        pool.stop(kill=True)
