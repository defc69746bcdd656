"""autotune_file: an --autotune_cache FlashInfer would ignore is found before the run starts."""

from __future__ import annotations

import json
import os
import shutil

from benchmark_model_kernels.run import autotune_file
from support import ROOT

#: A cache FlashInfer 0.6.17 saved on the H200 (stamped flashinfer_version 0.6.17, gpu NVIDIA H200).
CACHE_0617 = os.path.join(ROOT, "tests", "fixtures", "autotune", "flashinfer-0.6.17_h200.json")
#: One FlashInfer 0.6.18.post1 saved there.
CACHE_0618 = os.path.join(ROOT, "tests", "fixtures", "autotune", "flashinfer-0.6.18.post1_h200.json")


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


# ---------------------------------------------------------------- only FlashInfer's own file is written into


def test_flashinfers_stamped_caches_and_new_paths_are_taken(tmp_path):
    assert autotune_file.foreign_reason(CACHE_0617) is None
    assert autotune_file.foreign_reason(CACHE_0618) is None
    assert autotune_file.foreign_reason(str(tmp_path / "new.json")) is None
    assert autotune_file.foreign_reason(str(tmp_path / "not" / "yet" / "new.json")) is None  # FlashInfer makes it


def test_every_other_file_is_refused_and_left_as_it_was(tmp_path):
    config = os.path.join(ROOT, "scripts", "benchmark_model_kernels", "plan", "models", "llama-3.1-8b.json")
    results = os.path.join(ROOT, "tests", "fixtures", "results", "tiny_mixed.json")
    files = {"config.json": open(config, "rb").read(), "results.json": open(results, "rb").read(),
             "bytes.bin": bytes(range(256)), "empty.json": b"", "list.json": b"[1, 2]",
             "unstamped.json": json.dumps({"k": ["Runner", 0]}).encode(),
             "stamp_not_an_object.json": json.dumps({"_metadata": "0.6.18"}).encode(),
             "stamp_without_version.json": json.dumps({"_metadata": {"gpu": "NVIDIA H200"}}).encode(),
             "deep.json": b"[" * 100000 + b"]" * 100000}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder").mkdir()
    os.symlink(CACHE_0618, tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")  # opening it to read would block the run
    (tmp_path / "afile").write_text("")
    expected = {"config.json": "without FlashInfer's _metadata stamp", "results.json": "without FlashInfer's",
                "bytes.bin": "is not JSON", "empty.json": "is an empty file", "list.json": "not an object",
                "unstamped.json": "without FlashInfer's _metadata stamp",
                "stamp_not_an_object.json": "without FlashInfer's", "stamp_without_version.json": "without",
                "deep.json": "is not JSON", "folder": "is a directory", "link.json": "is a symbolic link",
                "fifo.json": "is not a regular file", "afile/cache.json": "cannot be created: "}
    for name, said in expected.items():
        reason = autotune_file.foreign_reason(str(tmp_path / name))
        assert reason is not None and said in reason, (name, reason)
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data
