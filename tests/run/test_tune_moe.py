"""scripts/tune_moe.py on a CPU: the shapes of real plans, the vLLM files it writes (names and
contents), the record, the table, resuming and its refusals. The kernel's timings are a stand-in
(plumbing only: a bowl whose minimum is known); tests/run/test_tune_moe_vllm.py loads the files
through vLLM itself."""

from __future__ import annotations

import json
import os

import pytest

from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.run import tune_moe as tm
from benchmark_model_kernels.run.tune_moe_out import RECORD, TABLE_CSV, TABLE_MD
from benchmark_model_kernels.vllm_rules.moe_config_files import TILE_KEYS, TUNER_BATCH_SIZES
from helpers_tune_moe import H200, StandIn, optimum, tune, vllm_files


@pytest.fixture(autouse=True)
def fresh_stand_in():
    StandIn.made, StandIn.measured, StandIn.fail_at = [], [], set()


QWEN = "qwen3-30b-a3b"
NAMES = {
    (QWEN, 1, 1): ["E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
                   "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
                   "E=128,N=768,device_name=NVIDIA_H200.json"],
    (QWEN, 2, 1): ["E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
                   "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
                   "E=128,N=384,device_name=NVIDIA_H200.json"],
    (QWEN, 1, 8): ["E=16,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
                   "E=16,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
                   "E=16,N=768,device_name=NVIDIA_H200.json"],
}


@pytest.mark.parametrize("model, tp, ep", sorted(NAMES))
def test_files_of_qwen3_30b_a3b_are_named_as_vllm_looks_them_up(tmp_path, model, tp, ep):
    rc, err, stdout = tune(tmp_path, model, "--tp", str(tp), "--ep", str(ep), "--keys", "1", "64")
    assert rc == 0, err
    assert vllm_files(tmp_path / "out") == NAMES[(model, tp, ep)]
    assert f"VLLM_TUNED_CONFIG_FOLDER={tmp_path / 'out'}" in stdout


def test_qwen3_at_tp4_shards_n_to_192(tmp_path):
    rc, err, _ = tune(tmp_path, QWEN, "--tp", "4", "--schemes", "bf16", "fp8_per_tensor", "--keys", "1", "64")
    assert rc == 0, err
    assert vllm_files(tmp_path / "out") == ["E=128,N=192,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
                                            "E=128,N=192,device_name=NVIDIA_H200.json"]


def test_deepseek_v3_tp8_ep8_block128_is_compared_with_vllms_shipped_file(tmp_path):
    rc, err, _ = tune(tmp_path, "deepseek-v3", "--tp", "8", "--ep", "8", "--schemes", "fp8_block128",
                      "--keys", "1", "64", "4096")
    assert rc == 0, err
    name = "E=32,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    assert vllm_files(tmp_path / "out") == [name]
    assert "(vLLM ships one: compared)" in err
    rows = json.loads((tmp_path / "out" / RECORD).read_text())["rows"].values()
    assert len(rows) == 3 and all(r["shipped"]["median_us"] and r["default"]["median_us"] for r in rows)
    assert {r["tokens_per_m"] for r in rows} == {1}  # TP=8 EP=8: DP=1, the MoE sees M tokens


def test_mixtral_files_and_the_default_keys(tmp_path):
    rc, err, _ = tune(tmp_path, "mixtral-8x7b", "--tp", "2", "--schemes", "bf16", "fp8_per_tensor")
    assert rc == 0, err
    assert vllm_files(tmp_path / "out") == ["E=8,N=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
                                            "E=8,N=7168,device_name=NVIDIA_H200.json"]
    doc = json.loads((tmp_path / "out" / "E=8,N=7168,device_name=NVIDIA_H200.json").read_text())
    assert list(doc) == ["triton_version"] + [str(k) for k in TUNER_BATCH_SIZES]


def test_file_contents_are_the_tuned_tiles_in_vllms_layout(tmp_path):
    rc, err, _ = tune(tmp_path, QWEN, "--ep", "8", "--schemes", "fp8_block128")
    assert rc == 0, err
    path = tmp_path / "out" / "E=16,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    text = path.read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=4) + "\n"  # as vLLM's tuner writes it
    assert doc.pop("triton_version") == "3.5.0"
    assert list(doc) == [str(k) for k in TUNER_BATCH_SIZES]
    for key, tiles in doc.items():
        assert list(tiles) == list(TILE_KEYS) and tiles == optimum(int(key)), key
    # vLLM's lookup key is the MoE layer's token count M x EP/TP: keys 8, 16, ... are M = 1, 2, ...
    assert "8(M=1) 16(M=2)" in err
    assert "| 8 | 1 | 16,64,128,1,4,3 |" in (tmp_path / "out" / TABLE_MD).read_text()


def test_table_has_the_three_times_and_the_gain(tmp_path):
    rc, err, _ = tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "64")
    assert rc == 0, err
    md = (tmp_path / "out" / TABLE_MD).read_text()
    assert "## E=128,N=768,device_name=NVIDIA_H200.json" in md
    row = next(line for line in md.splitlines() if line.startswith("| 64 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "32,64,128,1,4,3" and cells[3] == "10.0"  # tuned
    assert cells[4] != "-" and float(cells[5]) > 10.0  # vLLM ships E=128,N=768 for the H200
    assert float(cells[10].rstrip("x")) == pytest.approx(float(cells[5]) / 10.0, abs=0.01)  # gain vs shipped
    assert "python scripts/tune_moe.py qwen3-30b-a3b --schemes bf16 --keys 64" in md
    header = (tmp_path / "out" / TABLE_CSV).read_text().splitlines()[0]
    assert header.startswith("file,scheme,num_tokens,m_per_rank,tuned_tiles,tuned_us,shipped_tiles")


def test_a_rerun_keeps_the_record_and_a_changed_setting_reuses_the_cached_tiles(tmp_path):
    assert tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1", "64")[0] == 0
    first = len(StandIn.measured)
    StandIn.made.clear()
    rc, err, _ = tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1", "64")
    assert rc == 0 and StandIn.made == [] and "2 kept from" in err and "kept from the record" in err
    rc, err, _ = tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1", "64", "--num_iters", "50")
    assert rc == 0 and StandIn.made == [1, 64] and len(StandIn.measured) == first
    assert "2 with cached tiles, 0 to search" in err and "tiles from the cache" in err


def test_a_failed_key_is_reported_left_out_and_tried_again(tmp_path):
    StandIn.fail_at = {64}
    rc, err, stdout = tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1", "64", "512")
    assert rc == 1 and "1 key(s) failed" in stdout
    name = tmp_path / "out" / "E=128,N=768,device_name=NVIDIA_H200.json"
    assert list(json.loads(name.read_text())) == ["triton_version", "1", "512"]
    assert "out of memory at 64 tokens" in (tmp_path / "out" / TABLE_MD).read_text()
    StandIn.fail_at, StandIn.made = set(), []
    rc, err, _ = tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1", "64", "512")
    assert rc == 0 and StandIn.made == [64]
    assert list(json.loads(name.read_text())) == ["triton_version", "1", "64", "512"]


def test_a_file_it_did_not_write_is_never_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    mine = out / "E=128,N=768,device_name=NVIDIA_H200.json"
    mine.write_text("{}\n")
    with pytest.raises(UsageError, match="holds E=128,N=768,device_name=NVIDIA_H200.json, which this tool did "
                                         "not write"):
        tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1")
    assert mine.read_text() == "{}\n" and not (out / RECORD).exists() and StandIn.made == []


def test_a_file_changed_since_it_was_written_is_never_overwritten(tmp_path):
    assert tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1")[0] == 0
    path = tmp_path / "out" / "E=128,N=768,device_name=NVIDIA_H200.json"
    path.write_text(path.read_text().replace('"num_warps": 4', '"num_warps": 8'))
    with pytest.raises(UsageError, match="was changed since this tool wrote it"):
        tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1", "8")


def test_links_and_foreign_records_are_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / RECORD).write_text('{"rows": []}')
    with pytest.raises(UsageError, match="is not a record of this tool"):
        tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1")
    (out / RECORD).unlink()
    os.symlink(tmp_path / "elsewhere.json", out / "E=128,N=768,device_name=NVIDIA_H200.json")
    with pytest.raises(UsageError, match="is a symbolic link"):
        tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1")


def test_a_held_out_folder_is_refused(tmp_path):
    from benchmark_model_kernels.run.workdir import workdir_lock

    (tmp_path / "out").mkdir()
    with workdir_lock(str(tmp_path / "out"), ["another", "run"]):
        with pytest.raises(UsageError, match=r"--out=.*is in use by another run \(pid \d+: another run\)"):
            tune(tmp_path, QWEN, "--schemes", "bf16", "--keys", "1")


def test_ms_give_keys_of_m_times_ep_over_tp(tmp_path):
    rc, err, _ = tune(tmp_path, QWEN, "--ep", "8", "--schemes", "bf16", "--ms", "1", "4")
    assert rc == 0, err
    doc = json.loads((tmp_path / "out" / "E=16,N=768,device_name=NVIDIA_H200.json").read_text())
    assert list(doc) == ["triton_version", "8", "32"]


def test_dry_run_lists_shapes_files_keys_and_an_estimate_and_writes_nothing(tmp_path, capsys):
    rc = tm.main([QWEN, "--ep", "8", "--dry_run", "--device_name", H200, "--out", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert rc == 0
    assert "experts: E=16 of 128, N=768, H=2048, top_k=8" in text
    assert "file E=16,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json  (vLLM ships none" in text
    assert "keys: 1 2 4 8(M=1) 16(M=2)" in text and "4096(M=512)" in text
    assert "54 keys in 3 file(s)" in text and "estimate ~" in text
    assert "would write into" in text and not (tmp_path / "out").exists()


def test_dry_run_without_a_gpu_or_name_says_so(capsys):
    assert tm.main([QWEN, "--dry_run", "--schemes", "bf16", "--keys", "1"]) == 0
    text = capsys.readouterr().out
    assert "device_name=<GPU>" in text and "--device_name" in text


@pytest.mark.parametrize("argv, message", [
    ([QWEN, "--schemes", "fp8_per_tensor", "fp8_per_token", "--dry_run"], "share vLLM's dtype=fp8_w8a8 file"),
    ([QWEN, "--schemes", "nvfp4", "--dry_run"], "--schemes=nvfp4: choose from"),
    ([QWEN, "--keys", "0", "--dry_run"], "--keys=0: every token count must be a positive integer"),
    ([QWEN, "--keys", "1", "--ms", "1", "--dry_run"], "--ms"),
    ([QWEN, "--keys", "8", "8", "--dry_run"], "lists a value twice"),
    ([QWEN, "--tp", "2", "--ep", "3", "--dry_run"], "--ep=3: must be 1 or a multiple of --tp=2"),
    ([QWEN], "--out=(missing): name the folder"),
    ([QWEN, "--out", "x", "--device_name", H200], "--device_name=NVIDIA H200: is for --dry_run only"),
    (["llama-3.1-8b", "--dry_run"], "has no fused-MoE layer"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert tm.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_a_run_without_a_gpu_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    from benchmark_model_kernels.run import flags

    monkeypatch.setattr(flags, "detect_gpu", lambda: None)
    assert tm.main([QWEN, "--out", str(tmp_path / "out")]) == 2
    assert "GPU=(none visible)" in capsys.readouterr().err and not (tmp_path / "out").exists()
