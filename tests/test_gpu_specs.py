"""GPU names for --assume_cc: compute capability and memory from one name; unknown names are one
line listing the known ones."""

from __future__ import annotations

import pytest

from benchmark_model_kernels import cli_model
from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.gpu_specs import GPU_SPECS, gpu_spec, known_names
from benchmark_model_kernels.run import flags


@pytest.mark.parametrize("text,name,cc", [("h200", "H200", (9, 0)), ("NVIDIA H200", "H200", (9, 0)),
                                          ("H100_SXM", "H100", (9, 0)), ("b300", "B300", (10, 3)),
                                          ("RTX PRO 6000", "RTX-PRO-6000", (12, 0)), ("l40s", "L40S", (8, 9)),
                                          ("a100-80gb", "A100-80GB", (8, 0)), ("gb200", "GB200", (10, 0))])
def test_names_give_compute_capability_and_memory(text, name, cc):
    spec = gpu_spec(text)
    assert spec.name == name and spec.compute_capability == cc and spec.memory_gib > 0


def test_every_row_cites_its_source():
    for spec in GPU_SPECS.values():
        assert "nvidia" in spec.source.lower() or "nvidia-smi" in spec.source, spec.name


def test_h200_memory_is_what_nvml_reports():
    assert gpu_spec("h200").memory_gib == pytest.approx(143771 / 1024, abs=0.05)


@pytest.mark.parametrize("text,says", [("h900", "unknown GPU; known: " + known_names()),
                                       ("a100", "give one of A100-40GB, A100-80GB")])
def test_unknown_or_ambiguous_names_are_one_line(text, says):
    with pytest.raises(UsageError) as e:
        flags.parse_cc(text)
    assert str(e.value).startswith(f"--assume_cc={text}: ") and says in str(e.value)


def test_assume_cc_takes_numbers_and_names():
    assert flags.parse_cc("9.0") == flags.parse_cc("h200") == (9, 0)
    assert flags.assumed_memory_bytes("9.0") is None and flags.assumed_memory_bytes(None) is None
    assert flags.assumed_memory_bytes("h200") == int(gpu_spec("h200").memory_gib * 2**30)


def test_preview_sizes_its_memory_table_from_the_gpu_name(capsys):
    rc = cli_model.main(["llama-3.1-8b", "--print_only", "--assume_cc", "h200", "--planner", "rules"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "--assume_cc h200" in out and "    140.4  bf16" in out and "# on sm_90 (--assume_cc)" in out
    assert "    80  bf16" not in out  # the default sizes are not shown beside it


def test_preview_rejects_an_unknown_gpu_name_with_exit_2(capsys):
    rc = cli_model.main(["llama-3.1-8b", "--print_only", "--assume_cc", "h900"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "known: A100-40GB" in err
