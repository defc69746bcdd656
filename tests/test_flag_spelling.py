"""Kebab-case twins of every flag parse as the flag itself in every CLI; vLLM's own flag names
get one did-you-mean line naming this tool's flag, exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmark_model_kernels import cli_builtin, cli_model
from benchmark_model_kernels.core.errors import UsageError
from benchmark_model_kernels.core.flag_spelling import VLLM_FLAGS, respell
from benchmark_model_kernels.deploy import cli as deploy_cli
from benchmark_model_kernels.doctor import doctor
from benchmark_model_kernels.report import report
from benchmark_model_kernels.run import tune_moe
from support import ROOT

PARSERS = {"benchmark_model.py": cli_model.build_parser, "benchmark_via_builtin.py": cli_builtin.build_parser,
           "deploy.py": deploy_cli.build_parser, "report.py": report.build_parser,
           "check_env.py": doctor.build_parser, "tune_moe.py": tune_moe.build_parser}


def _kebab(flag: str) -> str:
    return "--" + flag[2:].replace("_", "-")


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_every_snake_flag_has_its_kebab_twin(cli):
    """Each --snake_case option of the CLI is found again from its --kebab-case spelling."""
    parser = PARSERS[cli]()
    options = list(parser._option_string_actions)  # noqa: SLF001
    snake = [o for o in options if o.startswith("--") and "_" in o]
    assert snake or cli == "report.py", cli  # report.py's flags are one word each
    for option in snake:
        assert respell([_kebab(option)], options) == [option]
        assert respell([_kebab(option) + "=3"], options) == [option + "=3"]


def test_kebab_flags_parse_as_the_snake_ones():
    parser = cli_model.build_parser()
    kebab = parser.parse_args(["llama-3.1-8b", "--print-only", "--no-attention", "--kv-lens", "1024", "4096",
                               "--gpu-memory-utilization", "0.8", "--trust_remote_code"])
    snake = parser.parse_args(["llama-3.1-8b", "--print_only", "--no_attention", "--kv_lens", "1024", "4096",
                               "--gpu_memory_utilization", "0.8", "--trust-remote-code"])
    assert vars(kebab) == vars(snake)
    assert kebab.kv_lens == [1024, 4096] and kebab.no_attention and kebab.trust_remote_code


def test_arguments_after_a_bare_double_dash_are_left_alone():
    assert respell(["--", "--kv-lens"], ["--kv_lens"]) == ["--", "--kv-lens"]


@pytest.mark.parametrize("argv,flag,says", [
    (["--tensor-parallel-size", "4"], "--tensor-parallel-size=4", "did you mean --tp?"),
    (["-tp", "4"], "-tp=4", "did you mean --tp?"),
    (["--tensor-parallel-size=2"], "--tensor-parallel-size=2", "did you mean --tp?"),
    (["--data-parallel-size", "8"], "--data-parallel-size=8", "--ep DP*TP"),
    (["--enable-expert-parallel"], "--enable-expert-parallel=(given)", "did you mean --ep?"),
    (["-ep"], "-ep=(given)", "--enable-expert-parallel"),
    (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype=fp8", "--kv_dtypes"),
    (["--block-size", "16"], "--block-size=16", "--page_size"),
])
def test_vllm_flag_names_get_one_did_you_mean_line(capsys, argv, flag, says):
    rc = cli_model.main(["llama-3.1-8b", "--print_only", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {flag}: ") and says in err and "vLLM's flag" in err


def test_a_cli_without_the_counterpart_keeps_its_own_answer():
    """report.py has no --tp: vLLM's -tp there is an unrecognized flag, as any other."""
    with pytest.raises(UsageError, match="unrecognized: report.py has no such flag"):
        report.build_parser().parse_args(["runs/x", "--tensor-parallel-size", "2"])


def test_deploy_says_it_plans_the_layouts_itself():
    with pytest.raises(UsageError, match="every TP x DP \\(x EP\\) layout of the --gpus"):
        deploy_cli.build_parser().parse_args(["qwen3-30b-a3b", "--gpus", "8xH200", "-tp", "8"])


def test_every_vllm_name_names_a_flag_some_cli_has_or_none():
    flags = {o for build in PARSERS.values() for o in build()._option_string_actions}  # noqa: SLF001
    for name, (ours, fix) in VLLM_FLAGS.items():
        assert ours == "" or ours in flags, name
        assert fix and "\n" not in fix


def test_script_answers_a_vllm_flag_in_one_line_exit_2():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "tune_moe.py"), "qwen3-30b-a3b",
                          "--tensor-parallel-size", "8"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: --tensor-parallel-size=8: did you mean --tp?")
