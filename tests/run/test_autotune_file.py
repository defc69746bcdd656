"""autotune_file: an --autotune_cache FlashInfer would ignore is found before the run starts."""

from __future__ import annotations

import json
import os
import shutil

from benchmark_model_kernels.run import autotune_file
from support import ROOT

#: A cache FlashInfer 0.6.17 saved on the H200 (stamped flashinfer_version 0.6.17, gpu NVIDIA H200).
CACHE_0617 = os.path.join(ROOT, "examples", "h200", "vllm_default", "cache", "autotune_cache.json")
#: One FlashInfer 0.6.18.post1 saved there.
CACHE_0618 = os.path.join(ROOT, "examples", "h200", "flashinfer_versions", "v0.6.18", "llama-3.1-8b_tp1",
                          "autotune_cache.json")


def test_a_cache_of_another_flashinfer_version_is_stale():
    reason = autotune_file.stale_reason(CACHE_0617, "0.6.18.post1", "NVIDIA H200")
    assert reason is not None
    assert "flashinfer_version 0.6.17 (here 0.6.18.post1)" in reason and "never saves" in reason
    assert "gpu" not in reason.split(";")[0]


def test_the_same_environment_and_unknowns_are_not_stale():
    assert autotune_file.stale_reason(CACHE_0618, "0.6.18.post1", "NVIDIA H200") is None
    # What this process cannot tell is left to FlashInfer.
    assert autotune_file.stale_reason(CACHE_0617, None, None) is None


def test_another_gpu_is_stale(tmp_path):
    path = tmp_path / "tuned.json"
    shutil.copy(CACHE_0618, path)
    reason = autotune_file.stale_reason(str(path), "0.6.18.post1", "NVIDIA B200")
    assert reason is not None and "gpu NVIDIA H200 (here NVIDIA B200)" in reason


def test_wildcards_indeterminate_stamps_and_unstamped_files_are_not_stale(tmp_path):
    path = tmp_path / "tuned.json"
    for meta in ({"flashinfer_version": "*", "gpu": "NVIDIA H200"},
                 {"flashinfer_version": "unknown", "gpu": "None"}, {}):
        path.write_text(json.dumps({"_metadata": meta, "k": ["Runner", 0]}))
        assert autotune_file.stale_reason(str(path), "0.6.18.post1", "NVIDIA H200") is None, meta
    path.write_text(json.dumps({"k": ["Runner", 0]}))
    assert autotune_file.stale_reason(str(path), "0.6.18.post1", "NVIDIA H200") is None
    path.write_text("not json")
    assert autotune_file.stale_reason(str(path), "0.6.18.post1", "NVIDIA H200") is None
    assert autotune_file.stale_reason(str(tmp_path / "absent.json"), "0.6.18.post1", "NVIDIA H200") is None
