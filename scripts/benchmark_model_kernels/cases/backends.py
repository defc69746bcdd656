"""Which backends exist for each (kind, recipe), the GPUs they run on, and known shape limits.

ONE hand table, `BACKENDS`: a row per (kind, dtype, routine, backend, variant). At run time the
installed FlashInfer answers which GPUs a driver backend runs on (`capabilities.py`: the library's
support checks and the driver's own routine table), and a backend it lists for a GEMM routine of
this table joins the plan as a row of its own (`specs_for`). The compute capabilities written here
answer only where FlashInfer does not: torch and Triton rows, routines without support checks
(mm_fp8 before 0.7), and a CPU preview without FlashInfer; they come from FlashInfer v0.6.17 (the
`@supported_compute_capability` decorators in flashinfer/gemm/gemm_base.py and the driver's
`routine_cc_to_supported_backends`), cited per row. Each skip reason names the source that
decided it. `shape_limit(case)` returns the reason a known kernel or driver limit rules a case out
("" when none), so no time is spent launching it. references/backends.md renders this table
(docs_tables.py); its prose explains the choices.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.case_schema import Case
from .capabilities import HAND, Capabilities

#: Backend label of the PyTorch baseline.
TORCH = "torch"
#: Backend label of this tool's Triton kernels of vLLM's designs (kernels/triton_ops.py).
TRITON = "triton"
#: Triton's FP8 `tl.dot` needs FP8 tensor cores: SM 8.9+.
_TRITON_FP8 = (8, 9)

#: What a with_quant twin adds: the activation quantization the kernel's input needs.
QUANT_FORMATS = {
    "fp8_per_tensor_static": "BF16 -> FP8 e4m3 with a given (static) per-tensor scale",
    "fp8_per_token_dynamic": "BF16 -> FP8 e4m3 with a per-row amax scale computed on the fly",
    "nvfp4_128x4": "BF16 -> NVFP4 (block 16, global scale) with 128x4-swizzled block scales",
    "nvfp4_8x4": "BF16 -> NVFP4 with 8x4-swizzled block scales (TRTLLM GEMM at M <= 32; "
                 "activation_quant() gives nvfp4_128x4 above)",
    "nvfp4_linear": "BF16 -> NVFP4 with linear (unswizzled) block scales",
    "fp8_per_group_128": "BF16 -> FP8 e4m3 with one scale per 1x128 group of each row (block FP8)",
}

#: The FP8 scheme (vllm_rules/quant_config.py FP8_SCHEMES) of each FP8 activation format: a row's
#: scheme is how its kernel consumes scales, which the activation it takes names.
QUANT_SCHEME = {
    "fp8_per_tensor_static": "per_tensor",
    "fp8_per_token_dynamic": "per_token",
    "fp8_per_group_128": "block128",
}

#: vLLM's FlashInfer TRTLLM NVFP4 linear switches the activation scale layout to 8x4 for M <= 32
#: (vllm/model_executor/layers/quantization/utils/flashinfer_utils.py: flashinfer_scaled_fp4_mm).
TRTLLM_FP4_8X4_MAX_M = 32

_GB = "flashinfer/gemm/gemm_base.py"  # at v0.6.17
_FBU = "benchmarks/routines/flashinfer_benchmark_utils.py"  # driver table at v0.6.17

_SM80_PLUS = ((8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
_SM89_PLUS_FP8 = ((8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1))
_BLACKWELL_FP4 = ((10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1))
_TRTLLM_GEN = ((10, 0), (10, 3), (10, 7))
_MOE_CUTLASS = ((10, 0), (10, 3), (10, 7), (12, 0), (12, 1))
#: What FlashInfer's CUTLASS fused MoE needs on Hopper, where vLLM runs it for static per-tensor
#: FP8 MoE: the library has an SM90 build, which is about 182 CUTLASS compile units (28 done after
#: 500 s with 16 jobs on the H200), so it needs the prebuilt flashinfer-jit-cache or a JIT build
#: of about an hour; this tool never starts that build.
_MOE_CUTLASS_SM90 = ("the driver's table gives cutlass_fused_moe no backend below sm_100; "
                     "on sm_90 the library's SM90 CUTLASS fused MoE (vLLM's kernel for static "
                     "per-tensor FP8 MoE on Hopper) needs the prebuilt flashinfer-jit-cache of the "
                     "wheel's release or a JIT build of about an hour, which this tool never starts")


@dataclass(frozen=True)
class BackendSpec:
    """One way to run one kind of layer in one recipe."""

    kind: str
    """"gemm" or "moe"."""
    dtype: str
    """Recipe: "bf16", "fp8" (per-tensor W8A8) or "nvfp4" (W4A4)."""
    routine: str
    """FlashInfer driver routine, or a torch op label for the torch backend."""
    backend: str
    """Backend label (what `--backends` filters on)."""
    variant: str = ""
    """Extra label that makes the case id unique ("per_tensor", "per_token", "quantized_input")."""
    ccs: tuple[tuple[int, int], ...] = ()
    """Compute capabilities it runs on (exact list), used when `min_cc` is None."""
    min_cc: tuple[int, int] | None = None
    """Runs on this compute capability and every newer one (torch ops)."""
    source: str = ""
    """Where the capability list comes from (file:line at FlashInfer v0.6.17, or the torch rule)."""
    quant: str = ""
    """Activation quantization a `with_quant` twin adds (a QUANT_FORMATS key); "" = no twin,
    because the kernel takes BF16 activations or quantizes them inside the timed call."""
    cc_note: str = ""
    """Appended to the capability skip reason (why the GPU is out, when it is not obvious)."""

    @property
    def scheme(self) -> str:
        """FP8 scheme of an FP8 row ("per_tensor", "per_token", "block128"); "" otherwise."""
        return QUANT_SCHEME.get(self.quant, "") if self.dtype == "fp8" else ""

    @property
    def driver(self) -> bool:
        """Runs through FlashInfer's benchmark driver (everything but the torch baseline)."""
        return self.backend not in (TORCH, TRITON)

    def supports(self, cc: tuple[int, int]) -> bool:
        """Whether a GPU of compute capability `cc` can run it."""
        if self.min_cc is not None:
            return tuple(cc) >= self.min_cc
        return tuple(cc) in self.ccs

    def cc_text(self) -> str:
        """"sm_89+" or "sm_100/103/107" style list of the GPUs it runs on."""
        if self.min_cc is not None:
            return f"sm_{self.min_cc[0]}{self.min_cc[1]}+"
        return "sm_" + "/".join(f"{a}{b}" for a, b in self.ccs)


BACKENDS: tuple[BackendSpec, ...] = (
    # ---- GEMM, BF16 (W16A16). torch.linear = F.linear = cuBLAS: vLLM's default.
    BackendSpec("gemm", "bf16", "torch.linear", TORCH, min_cc=(8, 0),
                source="torch: BF16 cuBLAS GEMM needs SM 8.0+"),
    BackendSpec("gemm", "bf16", "mm_bf16", "cudnn", ccs=_SM80_PLUS, source=f"{_GB}:341"),
    BackendSpec("gemm", "bf16", "mm_bf16", "cublaslt", ccs=_SM80_PLUS, source=f"{_GB}:318"),
    BackendSpec("gemm", "bf16", "mm_bf16", "cutlass", ccs=((10, 0), (10, 3), (10, 7)),
                source=f"{_GB}:291"),
    BackendSpec("gemm", "bf16", "mm_bf16", "tgv", ccs=((10, 0), (10, 3)), source=f"{_GB}:357"),
    BackendSpec("gemm", "bf16", "mm_bf16", "tinygemm",
                ccs=((9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)), source=f"{_GB}:418"),
    BackendSpec("gemm", "bf16", "mm_bf16", "cutile",
                ccs=((9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)), source=f"{_GB}:390"),
    # ---- GEMM, FP8 per-tensor W8A8. Every FP8 GEMM consumes already-quantized activations.
    BackendSpec("gemm", "fp8", "torch._scaled_mm", TORCH, "per_tensor", min_cc=(8, 9),
                source="torch: FP8 _scaled_mm needs SM 8.9+", quant="fp8_per_tensor_static"),
    BackendSpec("gemm", "fp8", "torch._scaled_mm", TORCH, "per_token", min_cc=(8, 9),
                source="torch: FP8 _scaled_mm needs SM 8.9+", quant="fp8_per_token_dynamic"),
    BackendSpec("gemm", "fp8", "bmm_fp8", "cudnn", ccs=_SM89_PLUS_FP8, source=f"{_GB}:6691",
                quant="fp8_per_tensor_static"),
    BackendSpec("gemm", "fp8", "bmm_fp8", "cublas", ccs=_SM89_PLUS_FP8, source=f"{_GB}:6704",
                quant="fp8_per_tensor_static"),
    BackendSpec("gemm", "fp8", "bmm_fp8", "cutlass", ccs=_BLACKWELL_FP4,
                source=f"{_GB}:6717", quant="fp8_per_tensor_static"),
    # mm_fp8 has no capability decorator. Its launcher runs trtllm-gen cubins whose kernels are
    # family builds "..._sm100f" (csrc/trtllm_low_latency_gemm_runner.cu:65-88), which run on
    # sm_100 and sm_103 (the same rule the trtllm GEMM runner spells out,
    # csrc/trtllm_gemm_runner.cu:46-54); Rubin (10.7) loads its own cubin set
    # (flashinfer/trtllm_low_latency_gemm.py:66-69, jit/gemm/core.py:910-970).
    BackendSpec("gemm", "fp8", "mm_fp8", "trtllm_low_latency", ccs=_TRTLLM_GEN,
                source="csrc/trtllm_low_latency_gemm_runner.cu:65-88 (sm100f cubins; "
                       "sm107 build for Rubin)",
                quant="fp8_per_tensor_static",
                cc_note="trtllm-gen low-latency GEMM is Blackwell-only"),
    # Block-128 FP8 (128x128 weight blocks, 1x128 activation groups: DeepSeek-V3 / Qwen3-FP8
    # checkpoints): vLLM's w8a8_block_fp8_matmul algorithm in this tool's Triton code.
    BackendSpec("gemm", "fp8", "triton.block_fp8_mm", TRITON, "block128", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_group_128"),
    # FlashInfer's groupwise-scaled FP8 GEMM (CUTLASS; 1x128 activation groups, 128x128 weight
    # blocks with --tile_size 128): the driver runs it on Blackwell only.
    BackendSpec("gemm", "fp8", "gemm_fp8_nt_groupwise", "cutlass", "block128", ccs=_TRTLLM_GEN,
                source=f"{_FBU}:438-449", quant="fp8_per_group_128"),
    # ---- GEMM, NVFP4 W4A4 (no torch rows: torch has no NVFP4 GEMM baseline here).
    BackendSpec("gemm", "nvfp4", "mm_fp4", "cudnn", ccs=_BLACKWELL_FP4, source=f"{_GB}:5657",
                quant="nvfp4_128x4"),
    BackendSpec("gemm", "nvfp4", "mm_fp4", "cutlass", ccs=_BLACKWELL_FP4, source=f"{_GB}:5726",
                quant="nvfp4_128x4"),
    BackendSpec("gemm", "nvfp4", "mm_fp4", "cute-dsl", ccs=((10, 0), (10, 3)),
                source=f"{_GB}:5754", quant="nvfp4_128x4"),
    BackendSpec("gemm", "nvfp4", "mm_fp4", "trtllm", ccs=_TRTLLM_GEN, source=f"{_GB}:5699",
                quant="nvfp4_8x4"),  # 8x4 for M <= TRTLLM_FP4_8X4_MAX_M, else 128x4
    # ---- MoE, BF16.
    BackendSpec("moe", "bf16", "triton.fused_moe", TRITON, min_cc=(8, 0),
                source="triton: BF16 tl.dot needs SM 8.0+"),
    BackendSpec("moe", "bf16", "torch._grouped_mm", TORCH, min_cc=(8, 0),
                source="torch: _grouped_mm needs SM 8.0+"),
    BackendSpec("moe", "bf16", "cutlass_fused_moe", "cutlass", ccs=_MOE_CUTLASS,
                source=f"{_FBU}:535-546", cc_note=_MOE_CUTLASS_SM90),
    # ---- MoE, FP8. All three take pre-quantized FP8 activations: the driver casts
    # outside the timed call (cutlass moe.py:1019; trtllm per-tensor moe.py:2311, NOT inside
    # run_fp8_per_tensor_moe), so each gets a with_quant twin.
    # torch's FP8 MoE row takes its input already quantized per token (like the FlashInfer rows);
    # the per-token quantization between GEMM1 and GEMM2 stays inside; the twin adds the input's.
    # vLLM's fused-MoE algorithm by FP8 scheme; a2 (between the GEMMs) is quantized inside the call.
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "per_tensor", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_tensor_static"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "per_token", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_token_dynamic"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "block128", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_group_128"),
    BackendSpec("moe", "fp8", "torch._scaled_grouped_mm", TORCH,
                ccs=((9, 0), (10, 0), (10, 3)),
                source="torch: _scaled_grouped_mm (row-wise scales) needs SM 9.0 or 10.x",
                quant="fp8_per_token_dynamic"),
    BackendSpec("moe", "fp8", "cutlass_fused_moe", "cutlass", ccs=_MOE_CUTLASS,
                source=f"{_FBU}:535-546", quant="fp8_per_tensor_static", cc_note=_MOE_CUTLASS_SM90),
    BackendSpec("moe", "fp8", "trtllm_fp8_per_tensor_scale_moe", "trtllm", ccs=_TRTLLM_GEN,
                source=f"{_FBU}:523-534", quant="fp8_per_tensor_static"),
    # Block-128 FP8 MoE of the TRTLLM-gen kernels (vLLM's first FP8 MoE choice on Blackwell).
    BackendSpec("moe", "fp8", "trtllm_fp8_block_scale_moe", "trtllm", "block128", ccs=_TRTLLM_GEN,
                source=f"{_FBU}:511-522", quant="fp8_per_group_128"),
    # ---- MoE, NVFP4. cutlass without --quantized_input quantizes BF16 input inside the kernel
    # (moe.py:1110-1113): no twin. The others take FP4 activations quantized outside the timed call.
    BackendSpec("moe", "nvfp4", "cutlass_fused_moe", "cutlass", ccs=_MOE_CUTLASS,
                source=f"{_FBU}:535-546",
                cc_note="the driver's table gives cutlass_fused_moe no backend below sm_100"),
    BackendSpec("moe", "nvfp4", "cutlass_fused_moe", "cutlass", "quantized_input",
                ccs=_MOE_CUTLASS, source=f"{_FBU}:535-546", quant="nvfp4_128x4",
                cc_note="the driver's table gives cutlass_fused_moe no backend below sm_100"),
    BackendSpec("moe", "nvfp4", "trtllm_fp4_block_scale_moe", "trtllm", ccs=_TRTLLM_GEN,
                source=f"{_FBU}:499-510", quant="nvfp4_linear"),
    BackendSpec("moe", "nvfp4", "cute_dsl_fp4_block_scale_moe", "cute-dsl",
                ccs=((10, 0), (10, 3)), source=f"{_FBU}:547-557", quant="nvfp4_linear"),
)

#: Every backend label, in table order (what `--backends` accepts).
BACKEND_NAMES: tuple[str, ...] = tuple(dict.fromkeys(s.backend for s in BACKENDS))

#: The driver's `--routing_method` choices at v0.6.17 (benchmarks/routines/moe.py:178-191).
DRIVER_ROUTING_METHODS = ("renormalize", "deepseek_v3", "llama4", "renormalize_naive", "topk")

#: MoE routines that route inside the timed kernel from router logits (the others get
#: precomputed top-k ids, softmax top-k on random logits, and ignore --routing_method).
ROUTING_IN_KERNEL = ("trtllm_fp8_per_tensor_scale_moe", "trtllm_fp8_block_scale_moe",
                     "trtllm_fp4_block_scale_moe")

#: Gated activations the trtllm-gen MoE kernels implement
#: (csrc/trtllm_fused_moe_runner.cu:355-370 activationTypeToGatedActType at v0.6.17).
TRTLLM_MOE_ACTIVATIONS = ("Swiglu", "Geglu", "Situ")
#: Non-gated (element-wise) activations they implement (same file, :371-380,
#: activationTypeToEltwiseActType).
TRTLLM_MOE_ELTWISE_ACTIVATIONS = ("Relu2", "Identity")


def _routine_lead(kind: str, dtype: str, routine: str) -> BackendSpec | None:
    """The first table row of a GEMM driver routine in one recipe: what a backend FlashInfer adds
    to that routine inherits (its variant and activation format)."""
    return next((s for s in BACKENDS if (s.kind, s.dtype, s.routine) == (kind, dtype, routine)
                 and s.driver and kind == "gemm"), None)


def _added_variant(lead: BackendSpec, routine: str, clash: bool) -> str:
    """An added row's variant: the routine's, or, where another routine of the recipe already has
    a row of that backend and variant (0.7's mm_fp8 cudnn beside bmm_fp8 cudnn), the routine name
    joined to it, so case ids stay unique."""
    if not clash:
        return lead.variant
    return f"{lead.variant}-{routine}" if lead.variant else routine


def specs_for(kind: str, dtype: str, caps: Capabilities = HAND) -> tuple[BackendSpec, ...]:
    """Rows of BACKENDS for one (kind, recipe), in table order, then one row per backend the
    installed FlashInfer lists for a GEMM routine of those rows that the table lacks (its GPUs and
    source from FlashInfer, its variant and activation format from the routine's first row; the
    driver argv of a GEMM routine names its backend, so it runs as is). MoE routines name no
    backend in their argv, so a new MoE backend needs a routine of its own here."""
    rows = [s for s in BACKENDS if s.kind == kind and s.dtype == dtype]
    for routine in dict.fromkeys(s.routine for s in rows if s.driver and s.kind == "gemm"):
        lead = _routine_lead(kind, dtype, routine)
        assert lead is not None
        known = {s.backend for s in rows if s.routine == routine}
        for backend in caps.backends_of(routine):
            if backend in known or backend in ("auto", TORCH, TRITON):
                continue
            facts = caps.facts(routine, backend)
            clash = any((s.backend, s.variant) == (backend, lead.variant) for s in rows)
            rows.append(BackendSpec(kind, dtype, routine, backend,
                                    _added_variant(lead, routine, clash),
                                    ccs=tuple(sorted(set.intersection(*(set(f.ccs) for f in facts)))),
                                    source=facts[0].source, quant=lead.quant))
    return tuple(rows)


def backend_names(caps: Capabilities = HAND) -> tuple[str, ...]:
    """Every backend label `--backends` accepts: the table's, those FlashInfer adds, then the
    attention routines' (cases/attention.py)."""
    from .attention import attention_backend_names

    added = (s.backend for kind, dtype in {(s.kind, s.dtype) for s in BACKENDS}
             for s in specs_for(kind, dtype, caps))
    return tuple(dict.fromkeys((*BACKEND_NAMES, *added, *attention_backend_names(caps))))


def find_spec(kind: str, dtype: str, routine: str, backend: str, variant: str) -> BackendSpec | None:
    """The BACKENDS row of one case or results row; for a backend FlashInfer added to a GEMM
    routine (`specs_for`), the row it was made from, with its own backend and variant; None for
    a row this table no longer has."""
    for spec in BACKENDS:
        if (spec.kind, spec.dtype, spec.routine, spec.backend, spec.variant) == (
                kind, dtype, routine, backend, variant):
            return spec
    lead = _routine_lead(kind, dtype, routine)
    if lead is not None and variant in (_added_variant(lead, routine, False),
                                        _added_variant(lead, routine, True)):
        return BackendSpec(kind, dtype, routine, backend, variant, quant=lead.quant,
                           source="added by the installed FlashInfer")
    return None


def scheme_of(kind: str, dtype: str, routine: str, backend: str, variant: str) -> str:
    """FP8 scheme of a case or results row ("" for BF16/NVFP4 or an unknown FP8 row)."""
    spec = find_spec(kind, dtype, routine, backend, variant)
    return spec.scheme if spec is not None else ""


@dataclass(frozen=True)
class ToolchainLimit:
    """A GPU the library's capability list admits but the compiler it needs cannot target."""

    routine: str
    backend: str
    cc: tuple[int, int]
    why: str
    """What was measured, with the compiler's own words."""


TOOLCHAIN_LIMITS: tuple[ToolchainLimit, ...] = (
    # Measured on the H200 (examples/h200/vllm_default/): with nvidia-cuda-tileiras 13.2 on PATH,
    # every cutile case fails to compile with "tileiras: for the --gpu-name option: Cannot find
    # option named 'sm_90'!", although gemm_base.py:390 lists 9.0.
    ToolchainLimit("mm_bf16", "cutile", (9, 0),
                   "mm_bf16 cutile compiles with tileiras, which has no sm_90 target "
                   "(tileiras 13.2: \"Cannot find option named 'sm_90'\"); FlashInfer's "
                   "capability list (flashinfer/gemm/gemm_base.py:390) admits sm_90"),
)


#: A routine whose first use on a GPU is a JIT build too long to start unasked: (routine, cc,
#: what it needs). FlashInfer's tables cannot say what a build costs; measured on the H200.
JIT_COST_LIMITS: tuple[tuple[str, tuple[int, int], str], ...] = (
    ("cutlass_fused_moe", (9, 0), _MOE_CUTLASS_SM90.split("; ", 1)[1]),
)


def capability_reason(spec: BackendSpec, cc: tuple[int, int] | None,
                      caps: Capabilities = HAND) -> str:
    """Why a GPU of capability `cc` cannot run `spec` ("" if it can, or if cc is unknown), naming
    the source that decided: a measured toolchain limit, FlashInfer's own answer (`caps`: the
    driver's table, which filters before launch, or the library's support check), else this
    hand table.

    >>> capability_reason(specs_for("gemm", "nvfp4")[1], (9, 0))
    'mm_fp4 cutlass needs sm_100/103/107/110/120/121; this GPU is sm_90 (hand table: flashinfer/gemm/gemm_base.py:5726)'
    """
    if cc is None:
        return ""
    cc = (int(cc[0]), int(cc[1]))
    for lim in TOOLCHAIN_LIMITS:
        if (lim.routine, lim.backend, lim.cc) == (spec.routine, spec.backend, cc):
            return lim.why
    label = f"{spec.routine} {spec.backend}" + (f" ({spec.variant})" if spec.variant else "")
    here = f"this GPU is sm_{cc[0]}{cc[1]}"
    note = f"; {spec.cc_note}" if spec.cc_note else ""
    if spec.driver:
        table = caps.driver_table(spec.routine)
        facts = caps.facts(spec.routine, spec.backend)
        if table and not any(f.via == "driver" for f in facts):
            return (f"{label}: the driver's table lists no {spec.backend} backend for "
                    f"{spec.routine} ({table[0].source})")
        for fact in sorted(facts, key=lambda f: f.via != "driver"):  # the driver filters first
            if fact.refuses(cc):
                return f"{label} needs {fact.cc_text()}; {here}{note} ({fact.source})"
        if facts and all(tuple(cc) in f.probed for f in facts):
            return _jit_cost_reason(spec, cc, caps)
    if spec.supports(cc):
        return _jit_cost_reason(spec, cc, caps)
    return f"{label} needs {spec.cc_text()}; {here}{note} (hand table: {spec.source})"


def _jit_cost_reason(spec: BackendSpec, cc: tuple[int, int], caps: Capabilities) -> str:
    """A JIT build too long to start unasked, when no prebuilt jit-cache is installed."""
    for routine, where, needs in JIT_COST_LIMITS:
        if (spec.routine, cc) == (routine, where) and not caps.jit_cache:
            return (f"{spec.routine} {spec.backend}: {needs}; flashinfer-jit-cache is not "
                    "installed (references/troubleshooting.md, \"Prebuilt kernels\")")
    return ""


def activation_quant(case: "Case") -> str:
    """QUANT_FORMATS key of the activation quantization `case`'s kernel consumes ("" if none).

    The with_quant twin's extra time is measured for exactly this format (trtllm mm_fp4 uses the
    8x4 scale layout for small M, as vLLM does)."""
    spec = find_spec(case.kind, case.dtype, case.routine, case.backend, case.variant)
    if spec is None:
        return ""
    if spec.quant == "nvfp4_8x4" and getattr(case.physical, "m", case.m) > TRTLLM_FP4_8X4_MAX_M:
        return "nvfp4_128x4"
    return spec.quant


@dataclass(frozen=True)
class ShapeLimit:
    """A kernel or driver needs one physical dimension to be a multiple of something."""

    routine: str
    """Routine the limit applies to."""
    backend: str
    """Backend label it applies to."""
    dim: str
    """"n", "k" (GEMM) or "hidden", "intermediate" (MoE), on the physical (padded) shape."""
    multiple: int
    """Required multiple."""
    why: str
    """What enforces it."""
    source: str
    """file:line at FlashInfer v0.6.17 (driver paths are under benchmarks/routines/), or torch."""
    dtype: str = ""
    """Recipe it applies to ("bf16", "fp8", "nvfp4"); "" = every recipe of the routine."""


_CUTLASS_MOE_TMA = ("TMA needs 128-bit aligned rows: 8 BF16 / 16 FP8 or FP4-packed elements",
                    "csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu:336-345")

SHAPE_LIMITS: tuple[ShapeLimit, ...] = (
    ShapeLimit("mm_bf16", "tinygemm", "n", 16, "TinyGEMM output features",
               f"{_GB}:441"),
    ShapeLimit("mm_bf16", "tinygemm", "k", 64, "TinyGEMM reduction tile",
               "flashinfer/gemm/routergemm.py:426-431"),
    # cuBLASLt FP8 needs 16-byte aligned leading dimensions: torch checks it, FlashInfer does not
    # (the call would fail inside cuBLASLt).
    ShapeLimit("bmm_fp8", "cublas", "k", 16, "cuBLASLt FP8 16-byte alignment", f"{_GB}:6704"),
    ShapeLimit("bmm_fp8", "cublas", "n", 16, "cuBLASLt FP8 16-byte alignment", f"{_GB}:6704"),
    ShapeLimit("torch._scaled_mm", TORCH, "k", 16, "torch _scaled_mm checks 16-byte alignment",
               "torch aten/src/ATen/native/cuda/Blas.cpp"),
    ShapeLimit("torch._scaled_mm", TORCH, "n", 16, "torch _scaled_mm checks 16-byte alignment",
               "torch aten/src/ATen/native/cuda/Blas.cpp"),
    ShapeLimit("mm_fp8", "trtllm_low_latency", "k", 128, "driver check",
               "benchmarks/routines/gemm.py:903-904"),
    ShapeLimit("mm_fp8", "trtllm_low_latency", "n", 32, "driver check",
               "benchmarks/routines/gemm.py:905-906"),
    ShapeLimit("mm_fp4", "trtllm", "n", 128, "weight shuffle with epilogue_tile_m=128",
               "benchmarks/routines/gemm.py:1359-1375"),
    ShapeLimit("mm_fp4", "cute-dsl", "n", 8, "CuTe-DSL FP4 GEMM", f"{_GB}:5776-5779"),
    # cutlass_fused_moe checks hidden and per-rank intermediate against the TMA alignment of the
    # narrower of activation and weight dtypes (FP4 weights count as packed bytes).
    ShapeLimit("cutlass_fused_moe", "cutlass", "hidden", 8, *_CUTLASS_MOE_TMA, dtype="bf16"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "intermediate", 8, *_CUTLASS_MOE_TMA, dtype="bf16"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "hidden", 16, *_CUTLASS_MOE_TMA, dtype="fp8"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "intermediate", 16, *_CUTLASS_MOE_TMA, dtype="fp8"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "hidden", 16, *_CUTLASS_MOE_TMA, dtype="nvfp4"),
    ShapeLimit("cutlass_fused_moe", "cutlass", "intermediate", 16, *_CUTLASS_MOE_TMA,
               dtype="nvfp4"),
    ShapeLimit("torch._grouped_mm", TORCH, "hidden", 8, "16-byte aligned BF16 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
    ShapeLimit("torch._grouped_mm", TORCH, "intermediate", 8, "16-byte aligned BF16 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
    ShapeLimit("torch._scaled_grouped_mm", TORCH, "hidden", 16, "16-byte aligned FP8 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
    ShapeLimit("torch._scaled_grouped_mm", TORCH, "intermediate", 16, "16-byte aligned FP8 rows",
               "torch aten/src/ATen/native/cuda/GroupedBlas.cpp"),
)


def shape_limit(case: "Case") -> str:
    """Reason a known kernel / driver limit rules `case` out on any GPU ("" when none).

    Divisibility limits come from SHAPE_LIMITS (on the physical, padded shape); activation and
    routing limits of the MoE routines are below. vLLM's own limits are padding.py's business."""
    r, b, p = case.routine, case.backend, case.physical
    for lim in SHAPE_LIMITS:
        if (lim.routine == r and lim.backend == b and lim.dtype in ("", case.dtype)
                and hasattr(p, lim.dim)):
            value = getattr(p, lim.dim)
            if value % lim.multiple:
                return (f"{r} {b} needs {lim.dim} % {lim.multiple} == 0; {lim.dim}={value} "
                        f"({lim.why}; {lim.source})")
    if case.kind == "gemm" and case.variant == "block128" and p.k % 128:
        return (f"block-128 FP8 needs K % 128 == 0 (1x128 activation groups); K={p.k} "
                "(vllm/model_executor/layers/quantization/utils/fp8_utils.py: per_token_group_quant_fp8)")
    if case.kind != "moe":
        return ""
    act = case.activation
    if case.variant == "block128":
        for dim, value in (("hidden", p.hidden), ("intermediate", p.intermediate)):
            if value % 128:
                return (f"block-128 FP8 MoE needs {dim} % 128 == 0 (128x128 weight blocks); "
                        f"{dim}={value}: vLLM refuses such a checkpoint shard "
                        "(vllm/model_executor/layers/quantization/fp8.py: Fp8MoEMethod.create_weights)")
    if r == "triton.fused_moe":
        return triton_moe_limit(case)
    if r == "cute_dsl_fp4_block_scale_moe" and act != "Swiglu":
        return (f"cute_dsl_fp4_block_scale_moe supports Swiglu only; activation is {act} "
                f"(benchmarks/routines/moe.py:1446-1452)")
    if r in ROUTING_IN_KERNEL:
        return trtllm_moe_limit(case)
    return ""


#: FlashInfer ActivationType names (the Case's) the Triton fused-MoE kernel implements, and the
#: kernel's own name for each (kernels/triton_moe/problem.py ACTIVATIONS).
TRITON_MOE_ACTIVATIONS = {
    "Swiglu": "silu_and_mul",
    "Geglu": "gelu_and_mul",
    "GegluTanh": "gelu_tanh_and_mul",
    "SwigluBias": "swigluoai",
    "Relu2": "relu2",
    "Silu": "silu",
    "Gelu": "gelu",
}


def triton_moe_limit(case: "Case") -> str:
    """Why the Triton fused MoE cannot run `case` ("" if it can)."""
    if case.activation not in TRITON_MOE_ACTIVATIONS:
        return (f"triton.fused_moe has no {case.activation} activation "
                f"(it has {', '.join(TRITON_MOE_ACTIVATIONS)})")
    return ""


#: The v0.6.17 driver's `fused_topk_deepseek` call (outside the timed region, for its bandwidth
#: figure) validates DeepSeek grouping before the kernel ever runs.
_DSV3_CHECK = "flashinfer/fused_moe/fused_routing_dsv3.py"
_RUNNER = "csrc/trtllm_fused_moe_runner.cu"
_DS_KERNEL = "csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_deepseek.cu"


def _deepseek_limit(r: str, e: int, top_k: int, n_group: int, topk_group: int) -> str:
    """Why deepseek_v3 routing with these groups cannot run through the driver ("" if it can)."""
    tail = f"(E={e}, top_k={top_k}, n_group={n_group}, topk_group={topk_group})"
    if topk_group > n_group or topk_group * n_group < top_k:
        return (f"{r}: the v0.6.17 driver's fused_topk_deepseek needs topk_group <= n_group and "
                f"topk_group * n_group >= top_k {tail} ({_DSV3_CHECK}:65-69)"
                + ("; ungrouped DeepSeek routing (n_group=1, e.g. Kimi-K2, GLM-4.5) passes only "
                   "with top_k=1, although the kernel itself supports it" if n_group == 1 else ""))
    if top_k > 8:
        return (f"{r}: deepseek_v3 routing through the v0.6.17 driver needs top_k <= 8 {tail} "
                f"({_DSV3_CHECK}:76,95)")
    if n_group > 1:
        if n_group > 8:
            return f"{r}: deepseek_v3 routing needs n_group <= 8 {tail} ({_DS_KERNEL}:524)"
        if e % n_group:
            return (f"{r}: deepseek_v3 routing needs E % n_group == 0 {tail} "
                    f"({_DS_KERNEL}:527)")
        if e // n_group > 32:
            return (f"{r}: deepseek_v3 routing needs E / n_group <= 32 {tail} "
                    f"({_DSV3_CHECK}:80)")
        if e // n_group * topk_group > 128:
            return (f"{r}: deepseek_v3 routing needs E / n_group * topk_group <= 128 {tail} "
                    f"({_DSV3_CHECK}:85)")
        if topk_group > 4:
            return f"{r}: deepseek_v3 routing needs topk_group <= 4 {tail} ({_RUNNER}:156)"
        if e % 4:
            return f"{r}: deepseek_v3 routing needs E % 4 == 0 {tail} ({_DS_KERNEL}:542)"
    elif e > 384:
        return (f"{r}: deepseek_v3 routing without groups needs E <= 384 through the v0.6.17 "
                f"driver {tail} ({_DSV3_CHECK}:91)")
    return ""


def trtllm_moe_limit(case: "Case") -> str:
    """Why a trtllm-gen MoE routine (routing inside the kernel) cannot run `case` ("" if it can).

    Activation: the kernels implement gated Swiglu/Geglu/Situ and element-wise Relu2/Identity.
    Non-gated cases run although the v0.6.17 driver allocates [E, 2I, H] GEMM1 weights: the FP8
    per-tensor and FP4 launchers never check the weight shape (only the BF16 and FP8 block-scale
    launchers call check_weights_shape, csrc/trtllm_fused_moe_kernel_launcher.cu:837,1463), and
    the kernel reads a contiguous [E_local, I, H] view from the start of the buffer: the same
    bytes per expert as vLLM's non-gated layer (random weights either way).
    Routing: the method must have a driver name, and the routing kernel's (and, for deepseek_v3,
    the driver's own fused_topk_deepseek) limits must hold."""
    r, act = case.routine, case.activation
    if case.gated and act not in TRTLLM_MOE_ACTIVATIONS:
        return (f"{r} implements gated activations {', '.join(TRTLLM_MOE_ACTIVATIONS)} only; "
                f"activation is {act} ({_RUNNER}:355-370)")
    if not case.gated and act not in TRTLLM_MOE_ELTWISE_ACTIVATIONS:
        return (f"{r} implements non-gated activations "
                f"{', '.join(TRTLLM_MOE_ELTWISE_ACTIVATIONS)} only; activation is {act} "
                f"({_RUNNER}:371-380)")
    routing = case.routing
    method = routing.method if routing else "renormalize"
    top_k, e = case.logical.top_k, case.logical.global_experts
    if method not in DRIVER_ROUTING_METHODS:
        return (f"{r} routes inside the kernel; routing '{method}' has no --routing_method "
                f"in the v0.6.17 driver (choices: {', '.join(DRIVER_ROUTING_METHODS)})")
    if method == "llama4":
        if top_k != 1:
            return f"{r}: llama4 routing needs top_k == 1; top_k={top_k} ({_RUNNER}:217)"
        if e > 128:
            return (f"{r}: llama4 routing needs E <= 128; E={e} "
                    f"(csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_llama4.cu:514)")
    elif method == "deepseek_v3":
        # The same defaults cases._routing_args passes to the driver.
        n_group = (routing.n_group if routing else None) or 1
        topk_group = (routing.topk_group if routing else None) or 1
        return _deepseek_limit(r, e, top_k, n_group, topk_group)
    elif top_k > 32 or e > 2048:
        return (f"{r}: {method} routing needs top_k <= 32 and E <= 2048; top_k={top_k}, E={e} "
                f"(csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_custom.cu:1504-1509)")
    return ""


__all__ = [
    "TORCH",
    "QUANT_FORMATS",
    "BackendSpec",
    "BACKENDS",
    "BACKEND_NAMES",
    "DRIVER_ROUTING_METHODS",
    "specs_for",
    "find_spec",
    "scheme_of",
    "QUANT_SCHEME",
    "ToolchainLimit",
    "TOOLCHAIN_LIMITS",
    "capability_reason",
    "backend_names",
    "JIT_COST_LIMITS",
    "activation_quant",
    "ShapeLimit",
    "SHAPE_LIMITS",
    "shape_limit",
    "TRTLLM_MOE_ACTIVATIONS",
    "TRTLLM_MOE_ELTWISE_ACTIVATIONS",
    "trtllm_moe_limit",
    "ROUTING_IN_KERNEL",
    "TRTLLM_FP4_8X4_MAX_M",
]
