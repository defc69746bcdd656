"""vLLM's own kernel selection asked, and compared with the hand table of vllm_rules/dispatch.py.

`ask_vllm` starts one process per target GPU (`vllm_dispatch_child`, which makes vLLM's platform
answer as that GPU) and builds vLLM's model class for a config on the meta device for each
quantization (`QUESTIONS`: a checkpoint's quantization_config or one of vLLM 0.33's online
`--quantization` shorthands) and layout. Each answer is what a layer kind's quantization method
selected: the linear kernel class (init_fp8_linear_kernel, init_nvfp4_linear_kernel,
dispatch_unquantized_gemm) or the MoE backend (select_*_moe_backend) with its experts class, the
activation quantization it was set up for, and the block shape a block-FP8 MoE runs with.
`disagreements` compares those answers with the hand table, one line each; the fidelity script
(benchmarks/vllm_dispatch_fidelity.py) and `--cross_check vllm` print them.

vLLM is imported only in the child processes; this module needs nothing but the standard library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vllm_rules.dispatch import VLLM_VERSION, LayerCell, VllmDefault, refined_fp8_block, table_row
from .vllm_target_gpu import TARGET_GPUS

#: A compressed-tensors FP8-dynamic checkpoint (llm-compressor's FP8_DYNAMIC recipe): per-channel
#: weights, activations per token on every call.
_CT_FP8_DYNAMIC = {
    "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
    "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"type": "float", "num_bits": 8, "strategy": "channel", "symmetric": True, "dynamic": False},
        "input_activations": {"type": "float", "num_bits": 8, "strategy": "token", "symmetric": True,
                              "dynamic": True}}}}


@dataclass(frozen=True)
class Question:
    """One way vLLM serves a recipe: a checkpoint's quantization_config or an online shorthand."""

    name: str
    recipe: str
    """"bf16", "fp8", "nvfp4" (this tool's recipes) or another recipe vLLM offers ("mxfp8", ...)."""
    scheme: str = ""
    """FP8 scheme (vllm_rules/quant_config.py FP8_SCHEMES)."""
    activation_scales: str = ""
    """Per-tensor FP8: "static" or "dynamic"."""
    config: dict[str, Any] | None = field(default=None, hash=False)
    """The quantization_config written into config.json (None: the checkpoint is BF16)."""
    shorthand: str = ""
    """vLLM's `--quantization` online shorthand (vllm/config/quantization.py: _ONLINE_SHORTHANDS)."""

    @property
    def online(self) -> bool:
        """Quantized by vLLM at load time: no checkpoint ignore list, and block-FP8 pads the shard to
        whole blocks instead of refining them (online/fp8.py: Fp8PerBlockOnlineMoEMethod.maybe_roundup_sizes)."""
        return bool(self.shorthand)


QUESTIONS: tuple[Question, ...] = (
    Question("bf16", "bf16"),
    Question("fp8 per-tensor, static checkpoint (quant_method fp8)", "fp8", "per_tensor", "static",
             {"quant_method": "fp8", "activation_scheme": "static"}),
    Question("fp8 per-tensor, static checkpoint (ModelOpt FP8)", "fp8", "per_tensor", "static",
             {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head"]}),
    Question("fp8 per-tensor, dynamic checkpoint (quant_method fp8)", "fp8", "per_tensor", "dynamic",
             {"quant_method": "fp8", "activation_scheme": "dynamic"}),
    Question("fp8 per-tensor, online --quantization fp8_per_tensor", "fp8", "per_tensor", "dynamic",
             shorthand="fp8_per_tensor"),
    Question("fp8 per-token, checkpoint (compressed-tensors FP8-dynamic)", "fp8", "per_token",
             config=_CT_FP8_DYNAMIC),
    Question("fp8 per-token, online --quantization fp8_per_channel", "fp8", "per_token", shorthand="fp8_per_channel"),
    Question("fp8 block-128, checkpoint (quant_method fp8, weight_block_size [128, 128])", "fp8", "block128",
             config={"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}),
    Question("fp8 block-128, online --quantization fp8_per_block", "fp8", "block128", shorthand="fp8_per_block"),
    Question("nvfp4, checkpoint (ModelOpt NVFP4)", "nvfp4",
             config={"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                     "exclude_modules": ["lm_head"]}),
    Question("nvfp4, online --quantization nvfp4_per_token (MoE only)", "nvfp4_per_token",
             shorthand="nvfp4_per_token"),
    Question("mxfp8, online --quantization mxfp8", "mxfp8", shorthand="mxfp8"),
    Question("mxfp4, online --quantization mxfp4", "mxfp4", shorthand="mxfp4"),
    Question("int8 weight-only MoE, online --quantization int8_per_channel_weight_only", "int8",
             shorthand="int8_per_channel_weight_only"),
)

#: Recipes and layer kinds the hand table answers for.
TABLE_RECIPES = ("bf16", "fp8", "nvfp4")
TABLE_KINDS = ("gemm", "moe", "router")
TABLE_GPUS = ("sm90", "sm100")


class DispatchUnavailable(Exception):
    """vLLM could not be asked (no vLLM, or its process failed); the message says why in one line."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    scripts = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (scripts, env.get("PYTHONPATH", "")) if p)
    env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    return env


def ask_vllm(raw: dict[str, Any], gpus: tuple[str, ...], layouts: tuple[tuple[int, int], ...],
             questions: tuple[Question, ...] = QUESTIONS, *, max_layers: int = 0,
             python: str | None = None, timeout_s: float = 900) -> tuple[str, list[dict[str, Any]]]:
    """(vLLM version, answers): vLLM's selection for config.json `raw` per target GPU (TARGET_GPUS
    keys), (TP, EP) layout and question. An answer names gpu, quantization, tp, ep, kind, kernel
    (vLLM's name), method, detail, activation_quant, block, source and layers, or carries `refused`
    (vLLM would not build that). `python` is the interpreter with vLLM (this one by default);
    `max_layers` > 0 builds only that many decoder layers (for models whose layers all match)."""
    request = {"config": raw, "layouts": [list(x) for x in layouts], "max_layers": max_layers,
               "questions": [{"name": q.name, "config": q.config, "shorthand": q.shorthand} for q in questions]}
    answers: list[dict[str, Any]] = []
    version = ""
    for gpu in gpus:
        if gpu not in TARGET_GPUS:
            raise ValueError(f"unknown target GPU {gpu!r} (choose from {', '.join(TARGET_GPUS)})")
        cmd = [python or sys.executable, "-m", "benchmark_model_kernels.crosscheck.vllm_dispatch_child", gpu]
        try:
            done = subprocess.run(cmd, input=json.dumps(request), capture_output=True, text=True,
                                  env=_child_env(), timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise DispatchUnavailable(f"asking vLLM for {gpu} took over {timeout_s:.0f} s") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise DispatchUnavailable(f"asking vLLM for {gpu} failed: {last[:300]}")
        payload = json.loads(done.stdout)
        version = payload["vllm"]
        answers.extend(payload["answers"])
    return version, answers


def _question(name: str) -> Question | None:
    return next((q for q in QUESTIONS if q.name == name), None)


def hand_cell(question: Question, answer: dict[str, Any]) -> LayerCell | None:
    """The hand table's cell for one answer (None: not a recipe or layer kind the table covers).
    A block-128 checkpoint's MoE is refined where vllm_rules says vLLM refines it."""
    kind = answer.get("kind", "")
    if question.recipe not in TABLE_RECIPES or kind not in TABLE_KINDS:
        return None
    refined = False
    if kind == "moe" and question.scheme == "block128" and not question.online:
        # The shard the plan gives this rank: I / TP without EP, I with it (vLLM's moe tp_size).
        intermediate = int(answer.get("intermediate_per_rank") or 0)
        refined = refined_fp8_block(intermediate, int(answer.get("hidden") or 0)) > 0
    return LayerCell(kind, question.recipe, question.scheme, int(answer.get("ep", 1)) > 1,
                     question.activation_scales, refined, str(answer.get("architecture", "")))


@dataclass(frozen=True)
class Comparison:
    """One answer beside the hand table's row for it."""

    answer: dict[str, Any]
    row: VllmDefault | None
    """The hand table's row (None: no rule for this cell)."""
    covered: bool
    """The hand table is meant to answer this cell (its GPUs, recipes and layer kinds)."""
    differences: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return not self.differences


def compare_answer(answer: dict[str, Any]) -> Comparison:
    """The hand table beside one of vLLM's answers: its kernel, activation quantization and, for a
    block-128 MoE, whether the blocks are refined."""
    question = _question(answer.get("quantization", ""))
    cell = hand_cell(question, answer) if question is not None and not answer.get("refused") else None
    gpu = answer.get("gpu", "")
    if cell is None:
        return Comparison(answer, None, False)
    row = table_row(gpu, cell)
    covered = gpu in TABLE_GPUS and (cell.kind != "router" or row is not None)
    if row is None:
        return Comparison(answer, None, covered, ("the hand table has no rule",) if covered else ())
    diffs = []
    if row.vllm_kernel != answer.get("kernel"):
        diffs.append(f"the hand table says {row.vllm_kernel}, vLLM selects {answer.get('kernel')}")
    if row.activation_quant and row.activation_quant != answer.get("activation_quant"):
        diffs.append(f"activations: the hand table says {row.activation_quant}, vLLM quantizes "
                     f"{answer.get('activation_quant') or 'none'}")
    block = answer.get("block") or []
    if cell.kind == "moe" and cell.scheme == "block128" and cell.refined != (bool(block) and block != [128, 128]):
        diffs.append(f"blocks: vllm_rules {'refines' if cell.refined else 'keeps 128x128'}, vLLM runs {block}")
    return Comparison(answer, row, True, tuple(diffs))


def where_text(answer: dict[str, Any]) -> str:
    """"sm90 moe, fp8 per-token ... at TP=1 EP=8"."""
    layout = f"TP={answer.get('tp')}" + (f" EP={answer['ep']}" if int(answer.get("ep", 1)) > 1 else "")
    return f"{answer.get('gpu')} {answer.get('kind') or 'model'}, {answer.get('quantization')} at {layout}"


def disagreements(answers: list[dict[str, Any]]) -> list[str]:
    """One line per answer the hand table gets wrong (kernel, activations, refined blocks, or no
    rule where it should have one)."""
    lines = []
    for answer in answers:
        c = compare_answer(answer)
        for diff in c.differences:
            source = f" ({answer['source']})" if answer.get("source") and "vLLM selects" in diff else ""
            lines.append(f"{where_text(answer)}: {diff}{source}")
    return lines


def refusals(answers: list[dict[str, Any]]) -> list[str]:
    """One line per (GPU, quantization, layout) not answered: vLLM would not build it there, or its
    selection called a compiled op the CPU cannot load."""
    return [f"{where_text(a)}: not answered: {a['refused']}" for a in answers if a.get("refused")]


def plan_questions(fp8_activation_scales: str) -> tuple[Question, ...]:
    """The questions of the recipes a plan's run times: BF16, the FP8 schemes (per-tensor with the
    plan's activation scales, online per-tensor when they are dynamic), NVFP4."""
    wanted = ["bf16", "fp8 per-token, checkpoint (compressed-tensors FP8-dynamic)",
              "fp8 block-128, checkpoint (quant_method fp8, weight_block_size [128, 128])",
              "nvfp4, checkpoint (ModelOpt NVFP4)"]
    wanted.append("fp8 per-tensor, static checkpoint (ModelOpt FP8)" if fp8_activation_scales == "static"
                  else "fp8 per-tensor, online --quantization fp8_per_tensor")
    return tuple(q for q in QUESTIONS if q.name in wanted)


@dataclass(frozen=True)
class DispatchCheck:
    """`--cross_check vllm`'s word on the hand table for one plan."""

    lines: tuple[str, ...] = ()
    """One per cell where the hand table differs from vLLM; one per quantization vLLM would not
    build on the target GPU (nothing compared there), or one saying vLLM could not be asked."""
    differs: bool = False
    """Some cell differs (not only: vLLM could not be asked)."""


def target_families(compute_capability: tuple[int, int] | None) -> tuple[str, ...]:
    """The target GPUs to ask about: the plan's GPU where the hand table has one for it, else every
    GPU family the hand table covers."""
    from ..vllm_rules.dispatch import gpu_family

    family = gpu_family(compute_capability)
    return (family,) if family in TABLE_GPUS else TABLE_GPUS


def check_plan_dispatch(raw: dict[str, Any], tp: int, ep: int, fp8_activation_scales: str,
                        compute_capability: tuple[int, int] | None = None) -> DispatchCheck:
    """What vLLM selects for config.json `raw` at TP=`tp`, EP=`ep` on the plan's GPU (or every GPU
    family of the hand table), for the recipes a run times, against the hand table."""
    gpus = target_families(compute_capability)
    try:
        version, answers = ask_vllm(raw, gpus, ((tp, ep),), plan_questions(fp8_activation_scales))
    except DispatchUnavailable as e:
        return DispatchCheck((f"dispatch: vLLM's kernel selection could not be asked: {e}",))
    lines = [f"dispatch: {line}" for line in disagreements(answers)]
    differs = bool(lines)
    # Where vLLM refused to build, nothing was compared: say so rather than imply agreement.
    lines += [f"dispatch: not compared: {line}" for line in refusals(answers)]
    if version != VLLM_VERSION:
        lines.insert(0, f"dispatch: the hand table matches vLLM {VLLM_VERSION}; this is vLLM {version}")
    return DispatchCheck(tuple(lines), differs)


__all__ = ["QUESTIONS", "TABLE_GPUS", "TABLE_KINDS", "TABLE_RECIPES", "Comparison", "DispatchCheck",
           "DispatchUnavailable", "Question", "ask_vllm", "check_plan_dispatch", "compare_answer", "disagreements",
           "hand_cell", "plan_questions", "refusals", "target_families", "where_text"]
