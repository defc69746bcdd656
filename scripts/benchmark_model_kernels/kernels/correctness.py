"""Is a timed kernel's output right? One extra call, outside the timed region, against FP32.

A fast backend that returns garbage must not win a table. After a torch or Triton case is timed,
its op runs once more and its output is compared with a reference computed in FP32 from the same
(dequantized) inputs the kernel read: `errors` measures max |out - ref|, the relative L2 error
||out - ref|| / ||ref|| and, for GEMMs, row-wise argmax parity; `decide` holds them against the
recipe's `Tolerance` (TOLERANCES, documented in references/correctness.md). A row beyond
tolerance becomes status "incorrect" with the numbers. FlashInfer driver rows use the driver's own
`--refcheck` instead (DRIVER_REFCHECK). `decide` and the tolerance table are pure (CPU tests);
`errors` needs torch (CPU tensors work), `verify` a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Tolerance:
    """What a recipe's output may differ from the FP32 reference by."""

    rel_l2: float
    """Largest ||out - ref||_2 / ||ref||_2."""
    max_abs: float
    """Largest max |out - ref|, as a fraction of max |ref| (a tail guard: a few wild values)."""
    argmax_tie: float
    """GEMMs: a row whose argmax differs from the reference's is a near-tie, not a failure, when
    the reference's own gap between the two columns is at most this fraction of the row's
    max |ref|; any other differing row fails the check."""
    why: str
    """Where the allowed error comes from."""


_BF16_OUT = ("one BF16 rounding of the output (2^-9 relative) and FP32-vs-tensor-core "
             "accumulation order: about 0.3% relative L2")
#: (kind, dtype) -> Tolerance; every FP8 scheme shares its kind's row: the kernel and the
#: reference read the same quantized values, so the scheme only changes how the scales look.
TOLERANCES: dict[tuple[str, str], Tolerance] = {
    ("gemm", "bf16"): Tolerance(1e-2, 2e-2, 2e-2, _BF16_OUT),
    ("gemm", "fp8"): Tolerance(1e-2, 2e-2, 2e-2, _BF16_OUT + "; the reference multiplies the same "
                               "FP8 values and scales in FP32"),
    ("moe", "bf16"): Tolerance(1e-2, 5e-2, 0.0, "BF16 roundings of GEMM 1, the activation, GEMM 2 and "
                               "the top-k sum, as vLLM rounds: about 0.5% relative L2"),
    ("moe", "fp8"): Tolerance(6e-2, 0.25, 0.0, "the activation output is re-quantized to FP8 e4m3 "
                              "between the two GEMMs inside the call (3 mantissa bits: 2.5-3% "
                              "relative RMS), which the FP32 reference does not model"),
}

#: FlashInfer driver routines whose `--refcheck` compares with a reference (v0.6.17
#: benchmarks/routines/gemm.py), and what it checks; a mismatch raises AssertionError, which the
#: runner turns into status "incorrect". The MoE routines this tool runs have no reference check
#: at v0.6.17 (benchmarks/routines/moe.py: only testUnifiedNvfp4Moe reads args.refcheck).
DRIVER_REFCHECK: dict[str, str] = {
    "mm_bf16": "cosine similarity >= 0.99 vs torch.mm of the same BF16 inputs (gemm.py:2224)",
    "bmm_fp8": "cosine similarity >= 0.99 vs torch.bmm of the BF16 inputs before quantization "
               "(gemm.py:794)",
    "mm_fp8": "cosine similarity >= 0.99 vs torch.mm of the BF16 inputs (gemm.py:1018)",
    "mm_fp4": "cosine similarity >= 0.97 vs torch.mm of the BF16 inputs (gemm.py:1529)",
    "gemm_fp8_nt_groupwise": "torch.isclose element counts vs the dequantized einsum (gemm.py:375)",
}


def tolerance(kind: str, dtype: str) -> Tolerance:
    """The Tolerance of a kind ("gemm"/"moe") and recipe dtype; KeyError for one without."""
    try:
        return TOLERANCES[(kind, dtype)]
    except KeyError:
        raise KeyError(f"no tolerance for kind={kind!r} dtype={dtype!r}; known: {sorted(TOLERANCES)}") from None


def tolerance_text(tol: Tolerance, gemm: bool) -> str:
    """The check's rule in words, for the row's check_note."""
    text = f"rel L2 <= {tol.rel_l2:g}, max abs <= {tol.max_abs:g} x max|ref|"
    if gemm:
        text += f", argmax parity per row (near-ties within {tol.argmax_tie:g} x max|ref row| allowed)"
    return text


@dataclass(frozen=True)
class Errors:
    """How far an output is from its reference."""

    max_abs_err: float
    ref_max_abs: float
    rel_l2_err: float
    argmax_match: float | None = None
    """GEMMs: fraction of rows whose argmax equals the reference's."""
    argmax_unexplained: int = 0
    """GEMMs: rows whose argmax differs from the reference's by more than a near-tie."""
    rows: int = 0
    non_finite: int = 0
    """Output values that are NaN or infinite (the other numbers are then not meaningful)."""


@dataclass(frozen=True)
class CheckResult:
    """The check of one row, as the Row records it."""

    check: str
    """"passed" or "failed"."""
    note: str
    max_abs_err: float | None = None
    rel_l2_err: float | None = None
    argmax_match: float | None = None

    @property
    def passed(self) -> bool:
        return self.check == "passed"

    def fields(self) -> dict[str, Any]:
        """The Row fields of this check."""
        return {"check": self.check, "max_abs_err": self.max_abs_err, "rel_l2_err": self.rel_l2_err,
                "argmax_match": self.argmax_match, "check_note": self.note}


def decide(err: Errors, tol: Tolerance, gemm: bool, reference: str) -> CheckResult:
    """Pass or fail `err` against `tol`; the note names the reference, the rule and what broke."""
    rule = tolerance_text(tol, gemm)
    if err.non_finite:
        return CheckResult("failed", f"{err.non_finite} output values are NaN or infinite; "
                           f"reference: {reference}; rule: {rule}")
    broken = []
    if not err.rel_l2_err <= tol.rel_l2:
        broken.append(f"rel L2 {err.rel_l2_err:.3g} > {tol.rel_l2:g}")
    limit = tol.max_abs * err.ref_max_abs
    if not err.max_abs_err <= limit:
        broken.append(f"max abs {err.max_abs_err:.3g} > {tol.max_abs:g} x max|ref| = {limit:.3g}")
    if gemm and err.argmax_unexplained:
        broken.append(f"argmax differs beyond a near-tie in {err.argmax_unexplained} of {err.rows} rows")
    measured = f"max abs {err.max_abs_err:.3g}, rel L2 {err.rel_l2_err:.3g}"
    if err.argmax_match is not None:
        measured += f", argmax parity {err.argmax_match:.3f}"
    verdict = "failed" if broken else "passed"
    note = f"{measured} vs {reference}; rule: {rule}"
    if broken:
        note = f"beyond tolerance: {'; '.join(broken)}; {note}"
    return CheckResult(verdict, note, err.max_abs_err, err.rel_l2_err, err.argmax_match)


def errors(out: Any, ref: Any, argmax_tie: float | None = None) -> Errors:
    """Errors of `out` against `ref` (torch tensors of one shape, any device); row-wise argmax
    parity over the last dimension when `argmax_tie` is given (GEMMs: out [M, N])."""
    import torch

    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"output shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}")
    o, r = out.float(), ref.float()
    non_finite = int((~torch.isfinite(o)).sum())
    diff = (o - r).abs()
    ref_norm = float(r.norm())
    rel = float((o - r).norm()) / ref_norm if ref_norm > 0 else (0.0 if float(o.norm()) == 0 else math.inf)
    err = Errors(float(diff.max()) if diff.numel() else 0.0, float(r.abs().max()) if r.numel() else 0.0,
                 rel, rows=int(r.shape[0]) if r.dim() else 1, non_finite=non_finite)
    if argmax_tie is None or r.dim() != 2 or r.shape[1] == 0 or non_finite:
        return err
    got, want = o.argmax(dim=1), r.argmax(dim=1)
    same = got == want
    gap = r.gather(1, want[:, None])[:, 0] - r.gather(1, got[:, None])[:, 0]
    allowed = argmax_tie * r.abs().amax(dim=1)
    unexplained = int(((~same) & (gap > allowed)).sum())
    match = float(same.float().mean())
    return Errors(err.max_abs_err, err.ref_max_abs, err.rel_l2_err, match, unexplained, err.rows, 0)


def check_output(out: Any, ref: Any, kind: str, dtype: str, reference: str) -> CheckResult:
    """`errors` + `decide` with the recipe's tolerance."""
    tol = tolerance(kind, dtype)
    gemm = kind == "gemm"
    return decide(errors(out, ref, tol.argmax_tie if gemm else None), tol, gemm, reference)


def verify(fn: Callable[..., Any], args: tuple, reference: Callable[[], Any], kind: str, dtype: str,
           described: str) -> CheckResult:
    """Run `fn(*args)` once more (outside any timing), compute `reference()` and check the output.
    The reference runs in FP32 with TF32 off, whatever the process default."""
    import torch

    out = fn(*args)
    torch.cuda.synchronize()
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref = reference()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    torch.cuda.synchronize()
    return check_output(out, ref, kind, dtype, described)


__all__ = ["DRIVER_REFCHECK", "TOLERANCES", "CheckResult", "Errors", "Tolerance", "check_output", "decide",
           "errors", "tolerance", "tolerance_text", "verify"]
