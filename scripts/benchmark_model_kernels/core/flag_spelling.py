"""Flag spellings users bring from other tools: kebab-case twins and vLLM's own names.

Every flag of this tool is snake_case (`--no_attention`); vLLM spells its flags kebab-case
(`--tensor-parallel-size`), and users type either. `respell` rewrites an exact kebab (or snake)
twin of one of the parser's flags to the flag itself, so `--kv-lens 1024` parses as
`--kv_lens 1024`; a vLLM flag this tool answers under another name (`--tensor-parallel-size`,
`-tp`) is one did-you-mean UsageError naming this tool's flag. `OneLineArgumentParser`
(`errors`) applies both before argparse sees the arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .errors import UsageError

#: vLLM's flags (vllm/engine/arg_utils.py, vLLM 0.33.0: EngineArgs.add_cli_args) that this tool
#: takes under another name or not at all: vLLM spelling -> (the flag this tool has, what to pass).
#: A line applies where the parser has the flag it names ("" where no parser has one).
VLLM_FLAGS: dict[str, tuple[str, str]] = {
    "--tensor-parallel-size": ("--tp", "this tool's tensor-parallel size is --tp, e.g. --tp 4"),
    "-tp": ("--tp", "this tool's tensor-parallel size is --tp, e.g. --tp 4"),
    "--data-parallel-size": ("--ep", "this tool plans one rank: a dense model's DP replicas each run the "
                             "--tp plan (give --tp only); for an MoE model with expert parallelism give "
                             "--ep DP*TP, e.g. -tp 1 -dp 8 --enable-expert-parallel is --tp 1 --ep 8"),
    "-dp": ("--ep", "this tool plans one rank: a dense model's DP replicas each run the --tp plan (give "
            "--tp only); for an MoE model with expert parallelism give --ep DP*TP, e.g. -tp 1 -dp 8 "
            "--enable-expert-parallel is --tp 1 --ep 8"),
    "--enable-expert-parallel": ("--ep", "this tool takes the EP size, vLLM's DP*TP ranks: --ep N, e.g. "
                                 "-tp 8 --enable-expert-parallel is --tp 8 --ep 8"),
    "-ep": ("--ep", "vLLM's -ep is --enable-expert-parallel; this tool takes the EP size, vLLM's DP*TP "
            "ranks: --ep N, e.g. -tp 8 -ep is --tp 8 --ep 8"),
    "--pipeline-parallel-size": ("", "pipeline parallelism is not modelled: one rank of one pipeline "
                                 "stage is the whole model here; leave it out"),
    "-pp": ("", "pipeline parallelism is not modelled: one rank of one pipeline stage is the whole model "
            "here; leave it out"),
    "--kv-cache-dtype": ("--kv_dtypes", "this tool times K/V cache dtypes with --kv_dtypes, e.g. "
                         "--kv_dtypes bf16 fp8 (vLLM's auto is bf16 for a BF16 model)"),
    "--block-size": ("--page_size", "vLLM's --block-size is --page_size here, e.g. --page_size 16"),
    "--max-model-len": ("--kv_lens", "this tool times decode at given context lengths: --kv_lens, e.g. "
                        "--kv_lens 4096 32768"),
    "--max-num-seqs": ("--ms", "this tool sweeps the tokens per rank per step with --ms, e.g. --ms 1 8 64 256"),
    "--quantization": ("--dtypes", "this tool times every recipe it is asked for with --dtypes, e.g. "
                       "--dtypes bf16 fp8"),
    "--enforce-eager": ("--modes", "this tool times eager launches with --modes eager (or --modes graph "
                        "eager for both)"),
}


def spelling_key(flag: str) -> str:
    """One key for a flag's snake and kebab spellings: `--kv-lens` and `--kv_lens` -> `--kv_lens`."""
    return "--" + flag[2:].replace("-", "_")


#: vLLM's parallelism flags: a CLI without --tp (deploy.py) picks the layouts itself.
PARALLEL_FLAGS = ("--tp", "--ep")


def respell(argv: Sequence[str], options: Iterable[str], prog: str = "this tool") -> list[str]:
    """`argv` with every kebab/snake twin of one of `options` (the parser's option strings)
    spelled as the option, up to a bare `--`. A vLLM flag (`VLLM_FLAGS`) is a UsageError naming
    this tool's flag where `options` holds it (or none exists); a parallelism flag given to a CLI
    without --tp but with --gpus (deploy.py) says that it tries the layouts itself."""
    known = set(options)
    twins: dict[str, list[str]] = {}
    for option in known:
        if option.startswith("--"):
            twins.setdefault(spelling_key(option), []).append(option)
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + list(argv[i:])
        flag, eq, value = arg.partition("=")
        if not flag.startswith("-") or flag in known:
            out.append(arg)
            continue
        if flag in VLLM_FLAGS:
            ours, fix = VLLM_FLAGS[flag]
            given = value or (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-")
                              else "(given)")
            if ours in PARALLEL_FLAGS and ours not in known and "--gpus" in known:
                raise UsageError(flag, given, f"{flag} is vLLM's flag; {prog} plans every TP x DP (x EP) "
                                 "layout of the --gpus it is given itself, e.g. --gpus 8xH200; leave it out")
            if not ours or ours in known:
                raise UsageError(flag, given, f"{'did you mean ' + ours + '? ' if ours else ''}"
                                 f"{flag} is vLLM's flag; {fix}")
        same = twins.get(spelling_key(flag), []) if flag.startswith("--") else []
        out.append(same[0] + eq + value if len(same) == 1 else arg)
    return out


__all__ = ["VLLM_FLAGS", "respell", "spelling_key"]
