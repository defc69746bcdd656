"""Which backends exist for each (kind, recipe), the GPUs they run on, and what activation they take.

ONE hand table, `BACKENDS`: a row per (kind, dtype, routine, backend, variant). At run time the
installed FlashInfer answers which GPUs a driver backend runs on (`capabilities.py`: the library's
support checks and the driver's own routine table), and a backend it lists for a GEMM routine of
this table joins the plan as a row of its own (`specs_for`). The compute capabilities written here
answer only where FlashInfer does not: torch and Triton rows, routines without support checks
(mm_fp8 before 0.7), and a CPU preview without FlashInfer; they come from FlashInfer v0.6.17 (the
`@supported_compute_capability` decorators in flashinfer/gemm/gemm_base.py and the driver's
`routine_cc_to_supported_backends`), cited per row. Each skip reason names the source that
decided it. `activation_quant` names the activation format a row's kernel consumes. The known
shape, activation and routing limits of the kernels are `kernel_limits.py`'s. references/backends.md
renders this table (docs_tables.py); its prose explains the choices.
"""

from __future__ import annotations

from dataclasses import dataclass

from .capabilities import HAND, Capabilities

#: Backend label of the PyTorch baseline.
TORCH = "torch"
#: Backend label of this tool's Triton kernels of vLLM's designs (kernels/triton_ops.py).
TRITON = "triton"
#: Triton's FP8 `tl.dot` needs FP8 tensor cores: SM 8.9+.
_TRITON_FP8 = (8, 9)
#: Variant label (alone, or after the FP8 scheme: "per_token-tuned") of the Triton MoE rows whose
#: tiles this tool searches on the GPU: what vLLM runs with a tuned config file. The unlabelled
#: Triton MoE rows run vLLM's own tile choice (vllm_rules/moe_triton.py).
TUNED = "tuned"

#: What a with_quant twin adds: the activation quantization the kernel's input needs.
QUANT_FORMATS = {
    "fp8_per_tensor_static": "BF16 -> FP8 e4m3 with a given (static) per-tensor scale",
    "fp8_per_tensor_dynamic": "BF16 -> FP8 e4m3 with one scale for the whole tensor computed on the "
                              "fly (amax reduction, then the cast: vLLM's online fp8_per_tensor)",
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
    "fp8_per_tensor_dynamic": "per_tensor",
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
    # checkpoints): vLLM's w8a8_triton_block_scaled_mm algorithm in this tool's Triton code, with vLLM's tiles.
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
    # ---- MoE, BF16. The triton rows run vLLM's tiles; their "tuned" twins, searched tiles.
    BackendSpec("moe", "bf16", "triton.fused_moe", TRITON, min_cc=(8, 0),
                source="triton: BF16 tl.dot needs SM 8.0+"),
    BackendSpec("moe", "bf16", "triton.fused_moe", TRITON, TUNED, min_cc=(8, 0),
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
    # Per-tensor as vLLM's online fp8_per_tensor runs its MoE: both scales computed per call.
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "per_tensor", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_tensor_dynamic"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "per_tensor-" + TUNED, min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_tensor_dynamic"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "per_token", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_token_dynamic"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "per_token-" + TUNED, min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_token_dynamic"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "block128", min_cc=_TRITON_FP8,
                source="triton: FP8 tl.dot needs SM 8.9+", quant="fp8_per_group_128"),
    BackendSpec("moe", "fp8", "triton.fused_moe", TRITON, "block128-" + TUNED, min_cc=_TRITON_FP8,
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


def tuned_tiles(variant: str) -> bool:
    """Whether a Triton MoE row of this variant runs searched tiles (TUNED) instead of vLLM's."""
    return variant == TUNED or variant.endswith(f"-{TUNED}")


def activation_quant(spec: BackendSpec, m: int) -> str:
    """QUANT_FORMATS key of the activation quantization `spec`'s kernel consumes at `m` physical
    rows ("" if none): what the case builder records on the Case (`Case.activation_quant`), the
    with_quant twin's measured format and the driver's scale-layout flag. trtllm mm_fp4 reads 8x4
    block scales for M <= TRTLLM_FP4_8X4_MAX_M and 128x4 above, as vLLM feeds it.

    >>> activation_quant(specs_for("gemm", "nvfp4")[3], 32), activation_quant(specs_for("gemm", "nvfp4")[3], 33)
    ('nvfp4_8x4', 'nvfp4_128x4')
    """
    if spec.quant == "nvfp4_8x4" and m > TRTLLM_FP4_8X4_MAX_M:
        return "nvfp4_128x4"
    return spec.quant


__all__ = [
    "TORCH",
    "TRITON",
    "TUNED",
    "QUANT_FORMATS",
    "QUANT_SCHEME",
    "TRTLLM_FP4_8X4_MAX_M",
    "BackendSpec",
    "BACKENDS",
    "BACKEND_NAMES",
    "specs_for",
    "find_spec",
    "scheme_of",
    "backend_names",
    "ToolchainLimit",
    "TOOLCHAIN_LIMITS",
    "JIT_COST_LIMITS",
    "capability_reason",
    "activation_quant",
    "tuned_tiles",
]
