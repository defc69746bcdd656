"""Backend support from FlashInfer's own answers (cases/capabilities.py): a stand-in capability
table decides skips, adds a backend FlashInfer lists without a code change, and names its source;
without FlashInfer the hand table answers and says so."""

from __future__ import annotations

import importlib.util
import os

import pytest

from benchmark_model_kernels.cases import backends as bk
from benchmark_model_kernels.cases.build import build_cases, check_filters
from benchmark_model_kernels.cases.capabilities import HAND, PROBED_CCS, Capabilities, Support, load_capabilities
from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.plan_schema import GemmEntry, ModelInfo, MoeEntry, Plan, Routing

SM90, SM100 = (9, 0), (10, 0)
LIB = "flashinfer 9.9.9: mm_bf16.is_backend_supported"
TABLE = ("driver table routine_cc_to_supported_backends['cutlass_fused_moe'] "
         "(benchmarks/routines/flashinfer_benchmark_utils.py, checkout 9.9.9)")
DRIVER_CCS = ((8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0))


def plan() -> Plan:
    gemm = GemmEntry(name="qkv_proj", modules=("model.layers.*.self_attn.qkv_proj",), n=6144,
                     k=4096, layers=32, parallel="column")
    moe = MoeEntry(name="experts", modules=("model.layers.*.mlp.experts",), hidden=2048,
                   intermediate=768, experts=128, global_experts=128, top_k=8, activation="Swiglu",
                   routing=Routing("renormalize"), layers=48)
    info = ModelInfo(name="m", source="bundled", model_type="qwen3_moe", architecture="A")
    return Plan(model=info, tp=1, ep=1, gemms=(gemm,), moe=(moe,))


def stand_in(moe_on_sm90: bool = False, jit_cache: str = "") -> Capabilities:
    """A FlashInfer that admits mm_bf16 cudnn on Blackwell only, adds a backend `newgemm` on
    sm_90, and (optionally) lists cutlass_fused_moe on sm_90 in its driver table."""
    moe = (SM90, SM100) if moe_on_sm90 else (SM100,)
    return Capabilities(
        origin="flashinfer 9.9.9 (stand-in)", flashinfer="9.9.9", jit_cache=jit_cache,
        routines=("mm_bf16", "cutlass_fused_moe"),
        supports=(Support("mm_bf16", "cudnn", (SM100,), PROBED_CCS, LIB),
                  Support("mm_bf16", "newgemm", (SM90, SM100), PROBED_CCS, LIB),
                  Support("cutlass_fused_moe", "cutlass", moe, DRIVER_CCS, TABLE, "driver")))


def by_id(cases):
    return {c.case_id: c for c in cases}


def test_a_backend_flashinfer_adds_joins_the_plan_and_runs_where_it_says():
    cases = by_id(build_cases(plan(), [8], ["bf16"], compute_capability=SM90, caps=stand_in()))
    new = cases["gemm.qkv_proj.m8.bf16.newgemm"]
    assert new.skip_reason == "" and new.routine == "mm_bf16"
    assert list(new.driver_args[new.driver_args.index("--backends"):][:2]) == ["--backends", "newgemm"]
    assert "gemm.qkv_proj.m8.bf16.newgemm" not in by_id(build_cases(plan(), [8], ["bf16"],
                                                                    compute_capability=SM90))


def test_flashinfer_answer_overrides_the_hand_table_and_is_named():
    caps = stand_in()
    cudnn = by_id(build_cases(plan(), [8], ["bf16"], compute_capability=SM90, caps=caps))[
        "gemm.qkv_proj.m8.bf16.cudnn"]
    assert cudnn.skip_reason == f"mm_bf16 cudnn needs sm_100; this GPU is sm_90 ({LIB})"
    # Where FlashInfer is silent (mm_bf16 cublaslt here), the hand table answers: runs on sm_90.
    hand = bk.find_spec("gemm", "bf16", "mm_bf16", "cublaslt", "")
    assert bk.capability_reason(hand, SM90, caps) == ""
    assert "hand table: " in bk.capability_reason(hand, (7, 0), caps)


def test_a_backend_missing_from_the_drivers_table_is_refused_with_that_source():
    caps = Capabilities(supports=(Support("trtllm_fp8_block_scale_moe", "trtllm", (SM100,),
                                          DRIVER_CCS, "table X", "driver"),))
    spec = bk.BackendSpec("moe", "fp8", "trtllm_fp8_block_scale_moe", "newmoe")
    assert bk.capability_reason(spec, SM100, caps) == (
        "trtllm_fp8_block_scale_moe newmoe: the driver's table lists no newmoe backend for "
        "trtllm_fp8_block_scale_moe (table X)")


def test_sm90_cutlass_fused_moe_needs_the_jit_cache_and_is_never_started_without_it():
    moe = bk.find_spec("moe", "fp8", "cutlass_fused_moe", "cutlass", "")
    # The driver's table refuses sm_90 (0.6.x): its source, and what the kernel would need.
    refused = bk.capability_reason(moe, SM90, stand_in())
    assert refused.startswith("cutlass_fused_moe cutlass needs sm_100; this GPU is sm_90; ")
    assert "flashinfer-jit-cache" in refused and "about an hour" in refused and TABLE in refused
    # A driver that admits sm_90: still skipped while no jit-cache is installed ...
    no_cache = bk.capability_reason(moe, SM90, stand_in(moe_on_sm90=True))
    assert "flashinfer-jit-cache is not installed" in no_cache and "never starts" in no_cache
    # ... and run once it is.
    assert bk.capability_reason(moe, SM90, stand_in(moe_on_sm90=True, jit_cache="9.9.9+cu130")) == ""


def test_backends_filter_accepts_what_flashinfer_adds():
    check_filters([8], ["bf16"], ["newgemm"], stand_in())
    with pytest.raises(UsageError, match="newgemm"):
        check_filters([8], ["bf16"], ["newgemm"])
    assert "newgemm" in bk.backend_names(stand_in()) and "newgemm" not in bk.backend_names()


def test_capabilities_round_trip_through_json():
    caps = stand_in(jit_cache="1")
    assert Capabilities.from_dict(caps.to_dict()) == caps


def test_without_flashinfer_the_hand_table_answers_and_says_why():
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("flashinfer is importable here")
    caps = load_capabilities(None)
    assert caps.supports == () and caps.origin.startswith(HAND.origin)
    assert "FlashInfer not importable here" in caps.origin and "flashinfer" in caps.origin


@pytest.mark.skipif(importlib.util.find_spec("flashinfer") is None, reason="needs flashinfer")
def test_the_installed_flashinfer_answers():
    caps = load_capabilities(os.environ.get("FLASHINFER_REPO"))
    assert caps.flashinfer and caps.origin.startswith(f"flashinfer {caps.flashinfer}")
    cudnn = caps.facts("mm_bf16", "cudnn")
    assert cudnn and SM90 in cudnn[0].ccs  # cuDNN BF16 GEMM runs on Hopper in every release


def test_an_added_backend_another_routine_has_gets_the_routine_in_its_id():
    """0.7's mm_fp8 gains cudnn and cublas, which bmm_fp8 already has: the added rows keep
    unique case ids and the routine's FP8 scheme and activation quantization."""
    caps = Capabilities(supports=(Support("mm_fp8", "cudnn", (SM90,), PROBED_CCS,
                                          "flashinfer 0.7.4: mm_fp8.is_backend_supported"),))
    cases = by_id(build_cases(plan(), [8], ["fp8"], compute_capability=SM90, caps=caps))
    added = cases["gemm.qkv_proj.m8.fp8.cudnn.mm_fp8"]
    assert added.routine == "mm_fp8" and added.skip_reason == "" and added.scheme == "per_tensor"
    assert cases["gemm.qkv_proj.m8.fp8.cudnn.mm_fp8.q"].with_quant
    assert added.activation_quant == "fp8_per_tensor_static"
    assert cases["gemm.qkv_proj.m8.fp8.cudnn.mm_fp8.q"].activation_quant == "fp8_per_tensor_static"
    assert cases["gemm.qkv_proj.m8.fp8.cudnn"].routine == "bmm_fp8"


def _fake_flashinfer(root, version: str) -> str:
    """A package named flashinfer that only counts its imports (one line per import in
    imports.txt): what the probe child imports, standing in for the real library."""
    pkg = root / "flashinfer"
    pkg.mkdir(exist_ok=True)
    counter = root / "imports.txt"
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n"
                                     f"with open({str(counter)!r}, 'a') as _f:\n    _f.write('x\\n')\n")
    return str(counter)


def _imports(counter: str) -> int:
    return len(open(counter).read().splitlines()) if os.path.exists(counter) else 0


@pytest.mark.skipif(importlib.util.find_spec("flashinfer") is not None,
                    reason="a real flashinfer is importable here; the stand-in package would be shadowed")
def test_the_probe_answer_is_kept_per_flashinfer_build_and_read_back(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    counter = _fake_flashinfer(site, "9.9.9")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    importlib.invalidate_caches()
    cache = str(tmp_path / "cache")
    first = load_capabilities(None, cache_dir=cache)
    assert first.flashinfer == "9.9.9" and _imports(counter) == 1
    assert load_capabilities(None, cache_dir=cache) == first and _imports(counter) == 1  # read back
    assert load_capabilities(None) == first and _imports(counter) == 2  # no cache folder: asked again
    _fake_flashinfer(site, "9.9.10")  # another build of the library: its answer is not the old one
    again = load_capabilities(None, cache_dir=cache)
    assert again.flashinfer == "9.9.10" and _imports(counter) == 3
    assert len(os.listdir(cache)) == 2
