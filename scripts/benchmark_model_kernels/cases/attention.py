"""Plan attention entries -> attention Cases timed by FlashInfer's driver (its attention routines).

One Case per (entry, phase, M or prefill length, KV length, KV dtype, backend):
  - decode: M sequences of one new token each over `kv_len` cached tokens (--batch_size M
    --s_qo 1 --s_kv kv_len); MHA/GQA/MQA runs BatchDecodeWithPagedKVCacheWrapper, MLA (absorbed:
    the query reads the latent and the RoPE key) BatchMLAPagedAttentionWrapper with
    --head_dim_ckv kv_lora_rank --head_dim_kpe qk_rope_head_dim;
  - prefill: one sequence of L tokens, causal (--batch_size 1 --s_qo L --s_kv L): MHA runs
    BatchPrefillWithPagedKVCacheWrapper; MLA prefill vLLM runs as MHA over the up-projected K/V
    (qk head dim qk_nope_head_dim + qk_rope_head_dim, v head dim v_head_dim:
    vllm/v1/attention/backends/mla/prefill/flash_attn.py), the ragged routine's shape, but the
    plan's attention entry does not carry those two dims, so those rows are unsupported and say so.

Backends: every backend the driver's `routine_cc_to_supported_backends` lists for the routine on
the GPU's compute capability (the installed checkout's table when the capability probe read it,
`capabilities.py`; else `HAND_ATTENTION_BACKENDS`, that table at the 0.6.18 release branch), except
"auto": a selector that picks one of the others at plan time, not a kernel of its own. Without a
GPU (a dry run) every backend any GPU has is planned. These are FlashInfer's kernels; which of
them vLLM runs is `vllm_rules/dispatch.py` VLLM_ATTENTION_DEFAULTS (on Hopper vLLM's default is
FLASH_ATTN, vllm-flash-attn, which no row here times).

The driver takes no sliding window (its attention parser has no window flag; the ragged routine
passes window_left=-1), so a windowed layer's decode is timed over min(kv_len, window) tokens,
which is what it reads, and the row says so; a windowed prefill longer than the window is no shape
the driver runs and is unsupported. Llama 4's chunked local attention is the same with its chunk:
a decode token reads the tokens of its own chunk, at most the chunk size, which is what is timed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..core.case_schema import (
    DEFAULT_KV_LENS,
    DEFAULT_SWEEP,
    KV_DTYPES,
    NO_ATTENTION,
    VLLM_BLOCK_SIZE,
    AttentionShape,
    AttentionSweep,
    Case,
    id_part,
)
from ..core.errors import UsageError
from ..core.plan_schema import AttentionEntry, Plan
from ..plan import memory
from ..vllm_rules.dispatch import attention_default_match
from .capabilities import HAND, Capabilities

DECODE = "BatchDecodeWithPagedKVCacheWrapper"
PREFILL = "BatchPrefillWithPagedKVCacheWrapper"
RAGGED = "BatchPrefillWithRaggedKVCacheWrapper"
MLA_DECODE = "BatchMLAPagedAttentionWrapper"
ATTENTION_ROUTINES = (DECODE, PREFILL, RAGGED, MLA_DECODE)

#: Backends of the driver's table that select another backend rather than being a kernel.
SELECTORS = ("auto",)

#: The driver's dtype names (benchmarks/routines/flashinfer_benchmark_utils.py dtype_str_to_torch_dtype).
DRIVER_DTYPE = {"bf16": "bfloat16", "fp8": "fp8_e4m3"}

_FBU = "benchmarks/routines/flashinfer_benchmark_utils.py:374-478 at release-v0.6.18"
_ATT = "benchmarks/routines/attention.py"  # at release-v0.6.18

_SM80_89 = ((8, 0), (8, 6), (8, 9))
#: `routine_cc_to_supported_backends` of the 0.6.18 driver for the attention routines, "auto" left
#: out (SELECTORS); the hand table answers when the probe could not read the checkout's own.
HAND_ATTENTION_BACKENDS: dict[str, dict[tuple[int, int], tuple[str, ...]]] = {
    DECODE: {
        (7, 5): ("fa2",),
        **{cc: ("fa2", "fa2_tc", "cudnn") for cc in _SM80_89},
        (9, 0): ("fa2", "fa2_tc", "cudnn", "trtllm-native"),
        (10, 0): ("fa2", "fa2_tc", "cudnn", "trtllm-gen", "trtllm-native", "prims-ts"),
        (10, 3): ("fa2", "fa2_tc", "cudnn", "trtllm-gen", "trtllm-native", "prims-ts"),
        (10, 7): ("fa2", "fa2_tc", "cudnn", "trtllm-gen", "trtllm-native"),
        (12, 0): ("fa2", "fa2_tc", "cudnn", "trtllm-native"),
        (12, 1): ("fa2", "fa2_tc", "cudnn", "trtllm-native"),
    },
    PREFILL: {
        (7, 5): (),
        **{cc: ("fa2", "cudnn", "cudnn-native") for cc in _SM80_89},
        (9, 0): ("fa2", "fa3", "cudnn", "cudnn-native", "trtllm-fmha-v2"),
        (10, 0): ("fa2", "cudnn", "cudnn-native", "trtllm-gen", "trtllm-native", "prims-ts"),
        (10, 3): ("fa2", "cudnn", "cudnn-native", "trtllm-gen", "trtllm-native", "prims-ts"),
        (10, 7): ("fa2", "cudnn", "cudnn-native", "trtllm-gen", "trtllm-native"),
        (12, 0): ("fa2", "cudnn", "cudnn-native", "trtllm-fmha-v2"),
        (12, 1): ("fa2", "cudnn", "cudnn-native"),
    },
    RAGGED: {
        (7, 5): (),
        **{cc: ("fa2", "cudnn", "cudnn-native") for cc in _SM80_89},
        (9, 0): ("fa2", "fa3", "cudnn", "cudnn-native", "trtllm-fmha-v2"),
        (10, 0): ("fa2", "cudnn", "cudnn-native", "cutlass", "cute-dsl", "trtllm-native", "prims-ts"),
        (10, 3): ("fa2", "cudnn", "cudnn-native", "cutlass", "cute-dsl", "trtllm-native", "prims-ts"),
        (12, 0): ("fa2", "cudnn", "cudnn-native", "trtllm-fmha-v2"),
        (12, 1): ("fa2", "cudnn", "cudnn-native"),
    },
    MLA_DECODE: {
        (7, 5): (),
        **{cc: ("fa2",) for cc in _SM80_89},
        (9, 0): ("fa2", "fa3"),
        (10, 0): ("fa2", "cutlass", "trtllm-native", "cute-dsl", "prims-ts"),
        (10, 3): ("fa2", "cutlass", "trtllm-native", "cute-dsl", "prims-ts"),
        (10, 7): ("fa2", "cutlass", "trtllm-native"),
        (12, 0): ("fa2",),
        (12, 1): ("fa2",),
    },
}


@dataclass(frozen=True)
class PageSizeLimit:
    """The page sizes one backend of one routine runs (the driver or the kernel refuses others)."""

    routine: str
    backend: str
    sizes: tuple[int, ...]
    source: str
    ccs: tuple[tuple[int, int], ...] = ()
    """GPUs the limit applies to (the kernel that has it runs there); () = every GPU."""


#: The decode API's XQA path (trtllm-native on sm_90 and sm_12x) JIT-builds per page size.
_XQA_CCS = ((9, 0), (12, 0), (12, 1))
PAGE_SIZE_LIMITS: tuple[PageSizeLimit, ...] = (
    PageSizeLimit(DECODE, "trtllm-native", (16, 32, 64, 128),
                  "flashinfer/jit/xqa.py:82 (XQA decode, what trtllm-native runs on sm_90/12x)", _XQA_CCS),
    PageSizeLimit(DECODE, "prims-ts", (16, 32, 64, 128), f"{_ATT}:697"),
    PageSizeLimit(PREFILL, "prims-ts", (16, 32, 64, 128), f"{_ATT}:1441"),
    PageSizeLimit(MLA_DECODE, "cutlass", (32, 64), f"{_ATT}:3138"),
    PageSizeLimit(MLA_DECODE, "trtllm-native", (32, 64), f"{_ATT}:3153"),
    PageSizeLimit(MLA_DECODE, "prims-ts", (16, 32, 64, 128), f"{_ATT}:3185"),
)

#: Why an attention row has no correctness check: the driver's --refcheck compares the outputs
#: of the backends of ONE call with each other (attention.py:1187, 2090, 2937, 3680: only when
#: more than one backend was tested), and each case runs one backend.
NO_REFCHECK = ("not checked: the driver's attention --refcheck compares the backends of one call "
               f"with each other ({_ATT}:1187), and each case runs one backend")
#: The driver times fa2 without a CUDA graph whatever the flags say (attention.py:1148, 1997, 2860,
#: 3639: use_cuda_graph=... and cur_backend != "fa2").
FA2_EAGER = f"the driver times fa2 without a CUDA graph ({_ATT}:1148)"


def _positive_distinct(flag: str, values: Sequence[object], example: str) -> None:
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UsageError(flag, v, f"every length must be a positive number of tokens, e.g. {flag} {example}")
    twice = [v for i, v in enumerate(values) if v in list(values)[:i]]
    if twice:
        raise UsageError(flag, " ".join(map(str, values)), f"lists {twice[0]} twice; give each value once")


def check_sweep(sweep: AttentionSweep) -> None:
    """The attention flags; raises UsageError naming the first bad value."""
    _positive_distinct("--kv_lens", sweep.kv_lens, "1024 8192 32768")
    _positive_distinct("--prefill_lens", sweep.prefill_lens, "1024 8192")
    for d in sweep.kv_dtypes:
        if d not in KV_DTYPES:
            raise UsageError("--kv_dtypes", d, f"choose from {', '.join(KV_DTYPES)}")
    if len(set(sweep.kv_dtypes)) != len(sweep.kv_dtypes):
        raise UsageError("--kv_dtypes", " ".join(sweep.kv_dtypes), "lists a dtype twice; give each once")
    p = sweep.page_size
    if isinstance(p, bool) or not isinstance(p, int) or p < 1 or p & (p - 1):
        raise UsageError("--page_size", p, "must be a power of two, like vLLM's KV block sizes, e.g. "
                         f"--page_size {VLLM_BLOCK_SIZE} (vLLM's default) or --page_size 64")


def attention_backend_names(caps: Capabilities = HAND) -> tuple[str, ...]:
    """Every attention backend label (what --backends accepts for attention rows)."""
    names: list[str] = []
    for routine in ATTENTION_ROUTINES:
        names += [b for table in HAND_ATTENTION_BACKENDS[routine].values() for b in table]
        names += [s.backend for s in caps.driver_table(routine) if s.backend not in SELECTORS]
    return tuple(dict.fromkeys(names))


def routine_backends(routine: str, cc: tuple[int, int] | None,
                     caps: Capabilities = HAND) -> tuple[tuple[str, ...], str]:
    """(backends, where the list comes from) of `routine` on a GPU of capability `cc`: the
    installed driver's table when the probe read it, else the hand table; every backend of any GPU
    when `cc` is None."""
    table = caps.driver_table(routine)
    if table:
        listed = tuple(s.backend for s in table if s.backend not in SELECTORS
                       and (cc is None or tuple(cc) in s.ccs))
        return listed, table[0].source
    hand = HAND_ATTENTION_BACKENDS[routine]
    if cc is None:
        return tuple(dict.fromkeys(b for v in hand.values() for b in v)), f"hand table ({_FBU})"
    return hand.get((cc[0], cc[1]), ()), f"hand table ({_FBU})"


def page_size_reason(routine: str, backend: str, page_size: int, cc: tuple[int, int] | None) -> str:
    """Why `backend` of `routine` cannot run pages of `page_size` tokens ("" if it can)."""
    for lim in PAGE_SIZE_LIMITS:
        if (lim.routine, lim.backend) != (routine, backend) or page_size in lim.sizes:
            continue
        if lim.ccs and (cc is None or tuple(cc) not in lim.ccs):
            continue
        sizes = "/".join(map(str, lim.sizes))
        return (f"{routine} {backend} runs pages of {sizes} tokens; --page_size is {page_size} "
                f"({lim.source})")
    return ""


def _shape(entry: AttentionEntry, phase: str, tokens: int, context: int, page_size: int) -> AttentionShape:
    window, chunk = entry.sliding_window, entry.attention_chunk_size
    decode = phase == "decode"
    # A decode token reads at most the window, or the tokens of its own chunk (at most the chunk).
    kv_len = min([context, *(x for x in (window, chunk) if x)]) if decode else context
    kv_heads, d_qk, d_vo = entry.num_kv_heads, entry.head_dim_qk, entry.head_dim_vo
    latent, rope = entry.kv_lora_rank, entry.qk_rope_head_dim
    if entry.kind == "mla" and not decode and entry.qk_nope_head_dim and entry.v_head_dim:
        # MLA prefill is MHA over K and V up-projected from the latent: every local head has its
        # own K (nope + rope) and V (vllm/v1/attention/backends/mla/prefill/flashinfer.py:
        # head_dim_qk = qk_nope_head_dim + qk_rope_head_dim, head_dim_vo = v_head_dim), and the
        # call reads those, not the latent.
        kv_heads = entry.num_q_heads
        d_qk, d_vo = entry.qk_nope_head_dim + entry.qk_rope_head_dim, entry.v_head_dim
        latent, rope = 0, 0
    return AttentionShape(
        phase=phase, batch_size=tokens if decode else 1, q_len=1 if decode else tokens,
        kv_len=kv_len, context_len=context, num_q_heads=entry.num_q_heads,
        num_kv_heads=kv_heads, head_dim_qk=d_qk, head_dim_vo=d_vo,
        page_size=0 if (entry.kind == "mla" and not decode) else page_size,
        kv_lora_rank=latent, qk_rope_head_dim=rope,
        sliding_window=window, attention_chunk_size=chunk, causal=not decode)


def _routine(entry: AttentionEntry, phase: str) -> str:
    if entry.kind == "mla":
        return MLA_DECODE if phase == "decode" else RAGGED
    return DECODE if phase == "decode" else PREFILL


def attention_argv(case_id: str, routine: str, backend: str, shape: AttentionShape,
                   kv_dtype: str) -> tuple[str, ...]:
    """The driver argv of one attention case (timing flags are added by run/argv.py)."""
    args = ["--routine", routine, "--backends", backend]
    if routine != RAGGED:
        args += ["--page_size", str(shape.page_size)]
    args += ["--batch_size", str(shape.batch_size), "--s_qo", str(shape.q_len),
             "--s_kv", str(shape.kv_len), "--num_qo_heads", str(shape.num_q_heads),
             "--num_kv_heads", str(shape.num_kv_heads)]
    if routine == MLA_DECODE:
        args += ["--head_dim_ckv", str(shape.kv_lora_rank), "--head_dim_kpe", str(shape.qk_rope_head_dim)]
    else:
        args += ["--head_dim_qk", str(shape.head_dim_qk), "--head_dim_vo", str(shape.head_dim_vo)]
    args += ["--q_dtype", "bfloat16", "--kv_dtype", DRIVER_DTYPE[kv_dtype]]
    if routine == RAGGED:
        args += ["--out_dtype", "bfloat16"]
    if shape.causal:
        args.append("--causal")
    args += ["--case_tag", case_id]
    return tuple(args)


def _unsupported_reason(entry: AttentionEntry, shape: AttentionShape, kv_dtype: str) -> str:
    """Why no driver call times this entry in this phase ("" when one does)."""
    if entry.kind == "mla" and shape.phase == "prefill" and not (entry.qk_nope_head_dim and entry.v_head_dim):
        return ("MLA prefill runs as MHA over the up-projected K/V (qk head dim qk_nope_head_dim + "
                "qk_rope_head_dim, v head dim v_head_dim; vllm/v1/attention/backends/mla/prefill/"
                "flash_attn.py), and this plan's attention entry does not carry qk_nope_head_dim or "
                "v_head_dim (a plan written before them: write it again with benchmark_model.py "
                "--plan_json)")
    if entry.kind == "mla" and shape.phase == "prefill" and kv_dtype != "bf16":
        return ("MLA prefill attends over K and V up-projected from the latent in the model's dtype "
                "whatever the cache's (vllm/v1/attention/backends/mla/prefill/flashinfer.py plans "
                "q_data_type = the prefill dtype), so an FP8 cache gives the same call as the bf16 row")
    if shape.phase == "prefill" and shape.sliding_window and shape.q_len > shape.sliding_window:
        return (f"sliding window {shape.sliding_window} < prefill length {shape.q_len}: the driver's "
                "prefill routines take no window (its attention parser has no window flag; "
                f"{_ATT}:2710 passes window_left=-1), so no driver call runs this layer's prefill")
    if shape.phase == "prefill" and shape.attention_chunk_size and shape.q_len > shape.attention_chunk_size:
        return (f"chunked local attention (chunks of {shape.attention_chunk_size}) < prefill length "
                f"{shape.q_len}: the driver's prefill routines take no such mask (no flag for it), so "
                "no driver call runs this layer's prefill")
    return ""


def _note(shape: AttentionShape, backend: str) -> str:
    notes = []
    if shape.kv_len < shape.context_len and shape.kv_len == shape.sliding_window:
        notes.append(f"sliding window {shape.sliding_window}: decode reads min({shape.context_len}, "
                     f"{shape.sliding_window}) = {shape.kv_len} tokens, timed as full attention over "
                     "them (the driver takes no window)")
    elif shape.kv_len < shape.context_len:
        notes.append(f"chunked local attention (chunks of {shape.attention_chunk_size}): a decode token "
                     f"reads the tokens of its own chunk, at most {shape.kv_len}; timed as full attention "
                     "over that many, the most it reads (the driver takes no chunk mask)")
    if backend == "fa2":
        notes.append(FA2_EAGER)
    return "; ".join(notes)


def _case_id(entry: AttentionEntry, phase: str, tokens: int, context: int, kv_dtype: str,
             backend: str) -> str:
    kv = f".kv{context}" if phase == "decode" else ""
    return f"attention.{id_part(entry.name)}.{phase}.m{tokens}{kv}.{kv_dtype}.{id_part(backend)}"


def attention_cases(plan: Plan, ms: Sequence[int], sweep: AttentionSweep = DEFAULT_SWEEP,
                    backends: Sequence[str] | None = None,
                    compute_capability: tuple[int, int] | None = None,
                    caps: Capabilities = HAND) -> list[Case]:
    """The attention Cases of `plan`: per entry, decode at every M x KV length, then prefill at
    every --prefill_lens value, each KV dtype, each backend the driver lists for the GPU (module
    docstring). `backends` filters by label; `sweep.enabled` False gives none."""
    if not sweep.enabled:
        return []
    check_sweep(sweep)
    cc = (int(compute_capability[0]), int(compute_capability[1])) if compute_capability else None
    wanted = set(backends) if backends else None
    cases: list[Case] = []
    for entry in plan.attention:
        work = [("decode", m, ctx) for m in ms for ctx in sweep.kv_lens]
        work += [("prefill", length, length) for length in sweep.prefill_lens]
        for phase, tokens, context in work:
            routine = _routine(entry, phase)
            shape = _shape(entry, phase, tokens, context, sweep.page_size)
            listed, _ = routine_backends(routine, cc, caps)
            for kv_dtype in sweep.kv_dtypes:
                for backend in listed:
                    if wanted is not None and backend not in wanted:
                        continue
                    case_id = _case_id(entry, phase, tokens, context, kv_dtype, backend)
                    no_call = _unsupported_reason(entry, shape, kv_dtype)
                    reason = no_call or page_size_reason(routine, backend, shape.page_size, cc)
                    argv = () if no_call else attention_argv(case_id, routine, backend, shape, kv_dtype)
                    cases.append(Case(
                        case_id=case_id, kind="attention", name=entry.name, modules=entry.modules,
                        layers=entry.layers, m=shape.tokens, dtype=kv_dtype, backend=backend,
                        routine=routine, logical=shape, physical=shape, driver_args=argv,
                        skip_reason=reason, note=_note(shape, backend),
                        vllm_default=attention_default_match(cc, entry.kind, phase, kv_dtype, backend)))
    return cases


def unfit_reason(plan: Plan, case: Case, room: memory.MemoryEstimate) -> str:
    """Why an attention case's sequences cannot be held by one rank, or "": its batch of sequences
    of `context_len` tokens needs more K/V cache (over every layer of the plan, windows applied)
    than `room` leaves (the estimate of the case's K/V dtype with the smallest weights asked for,
    `mark_unfit`). vLLM could not run that step, so it is not timed: the driver fills the K/V cache
    on the CPU, minutes for such a case."""
    shape = case.logical
    if case.kind != "attention" or not isinstance(shape, AttentionShape) or not plan.attention:
        return ""
    if memory.fits(room, plan, shape.batch_size, shape.context_len):
        return ""
    need = memory.kv_bytes(plan, case.dtype, shape.batch_size, shape.context_len)
    if not room.weights_fit:
        return (f"does not fit on one rank: the weights of {room.recipe} (the smallest of the recipes asked "
                f"for) take {memory.gib(room.weight_bytes)} GiB, more than the {memory.gib(room.usable_bytes)} "
                f"GiB vLLM may use of this {memory.gib(room.gpu_mem_bytes)} GiB GPU, so no K/V cache is left "
                "(references/memory.md); a larger --tp or --ep, or a smaller recipe such as --dtypes fp8, "
                "gives the rank room")
    return (f"does not fit on one rank: {shape.batch_size} sequence(s) x {shape.context_len} tokens need "
            f"{memory.gib(need)} GiB of {case.dtype.upper()} K/V cache over the plan's layers; "
            f"{memory.gib(max(room.kv_budget_bytes, 0))} GiB is left on this {memory.gib(room.gpu_mem_bytes)} "
            f"GiB GPU after the weights of {room.recipe} (the smallest of the recipes asked for) and the "
            "activation reserve (references/memory.md)")


def mark_unfit(cases: Sequence[Case], plan: Plan, recipes: Sequence[str], gpu_mem_bytes: int) -> list[Case]:
    """`cases` with the attention cases one rank of a `gpu_mem_bytes` GPU could not hold
    (`unfit_reason`) decided unsupported before launch; per K/V dtype the room is that of the
    recipe in `recipes` with the smallest weights (BF16 when none is a weight recipe)."""
    weights = [r for r in recipes if r in memory.RECIPES] or ["bf16"]
    rooms: dict[str, memory.MemoryEstimate] = {}
    out = []
    for case in cases:
        reason = ""
        if case.kind == "attention" and not case.skip_reason:
            if case.dtype not in rooms:
                rooms[case.dtype] = max((memory.estimate(plan, r, case.dtype, gpu_mem_bytes) for r in weights),
                                        key=lambda e: e.kv_budget_bytes)
            reason = unfit_reason(plan, case, rooms[case.dtype])
        out.append(replace(case, skip_reason=reason, driver_args=()) if reason else case)
    return out


__all__ = [
    "mark_unfit",
    "unfit_reason",
    "ATTENTION_ROUTINES",
    "AttentionSweep",
    "DECODE",
    "DEFAULT_KV_LENS",
    "DEFAULT_SWEEP",
    "FA2_EAGER",
    "HAND_ATTENTION_BACKENDS",
    "MLA_DECODE",
    "NO_ATTENTION",
    "NO_REFCHECK",
    "PAGE_SIZE_LIMITS",
    "PREFILL",
    "RAGGED",
    "SELECTORS",
    "VLLM_BLOCK_SIZE",
    "attention_argv",
    "attention_backend_names",
    "attention_cases",
    "check_sweep",
    "page_size_reason",
    "routine_backends",
]
