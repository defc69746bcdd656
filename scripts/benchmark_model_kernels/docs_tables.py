"""Render the code tables (backends.py, padding.py, dispatch.py) into references/*.md, so docs cannot drift.

Each reference file holds hand-written prose plus generated blocks between
`<!-- BEGIN GENERATED: <name> -->` and `<!-- END GENERATED: <name> -->`; a test checks that the
committed blocks equal what this module renders.

    cd scripts && python -m benchmark_model_kernels.docs_tables --check   # exit 1 when stale
    cd scripts && python -m benchmark_model_kernels.docs_tables --write   # rewrite the blocks
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Callable

from .cases import attention as at
from .cases import backends as bk
from .cases import kernel_limits as kl
from .vllm_rules import dispatch as dp
from .vllm_rules import padding as pd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCES = os.path.join(ROOT, "references")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def render_backends() -> str:
    rows = []
    for s in bk.BACKENDS:
        rows.append((s.kind, s.dtype, s.scheme, _code(s.routine), _code(s.backend), s.variant,
                     s.cc_text(), _code(s.quant) if s.quant else "no", s.source))
    return _table(("kind", "dtype", "FP8 scheme", "routine", "backend", "variant", "runs on",
                   "with_quant twin", "capability source"), rows)


def render_vllm_defaults() -> str:
    match = {"same": "the same kernel", "design": "vLLM's design, this tool's Triton code", "": "none"}
    ep = {None: "any", True: "EP > 1", False: "no EP"}
    refined = {None: "", True: "; shard refined", False: "; 128x128 blocks"}
    rows = []
    for r in dp.VLLM_DEFAULTS:
        timed = (f"{_code(r.backend)} {_code(r.routine)}".strip() + f": {match[r.match]}"
                 if r.match else f"none: {r.missing}")
        if r.closest:
            timed += f"; closest timed: {_code(r.closest[0])} {_code(r.closest[1])}"
        scheme = r.scheme + (f" ({r.activation_scales} activation scales)" if r.activation_scales else "")
        rows.append((r.family, r.kind, r.recipe, scheme, ep[r.ep_only] + refined[r.refined], r.kernel,
                     _code(r.vllm_kernel) + (f", acts {_code(r.activation_quant)}" if r.activation_quant else ""),
                     timed))
    return _table(("GPU", "kind", "recipe", "FP8 scheme", "parallel", "vLLM runs by default",
                   "vLLM's selection answers", "row that times it"), rows)


def render_quant_formats() -> str:
    return _table(("quant format", "what the with_quant twin adds"),
                  [(_code(k), v) for k, v in bk.QUANT_FORMATS.items()])


def render_shape_limits() -> str:
    rows = [(_code(s.routine), _code(s.backend), s.dtype or "all", f"{s.dim} % {s.multiple} == 0",
             s.why, s.source) for s in kl.SHAPE_LIMITS]
    return _table(("routine", "backend", "dtype", "needs (physical shape)", "why", "source"), rows)


def _gated(value: bool | None) -> str:
    return {None: "any", True: "gated", False: "non-gated"}[value]


def render_pad_rules() -> str:
    rows = [(_code(r.routine), ", ".join(r.backends) or "all", r.dtype, r.dim,
             f"round up to {r.multiple}", _gated(r.gated), _code(r.source)) for r in pd.PAD_RULES]
    return _table(("routine", "backends", "dtype", "dim", "rule", "activation", "vLLM source"),
                  rows)


def render_vllm_limits() -> str:
    rows = [(_code(r.routine), ", ".join(r.backends) or "all", r.dtype, r.dim,
             f"{r.dim} % {r.multiple} == 0", _gated(r.gated), r.error, _code(r.source))
            for r in pd.VLLM_LIMITS]
    return _table(("routine", "backends", "dtype", "dim", "vLLM needs", "activation",
                   "otherwise", "vLLM source"), rows)


def _ccs_text(ccs: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}.{b}" for a, b in ccs)


def render_attention_backends() -> str:
    rows = []
    for routine, by_cc in at.HAND_ATTENTION_BACKENDS.items():
        for backend in dict.fromkeys(b for v in by_cc.values() for b in v):
            rows.append((_code(routine), _code(backend), _ccs_text([cc for cc, v in by_cc.items() if backend in v])))
    return _table(("routine", "backend", "compute capabilities (driver table, release-v0.6.18)"), rows)


def render_page_size_limits() -> str:
    rows = [(_code(p.routine), _code(p.backend), "/".join(map(str, p.sizes)),
             _ccs_text(list(p.ccs)) or "all", p.source) for p in at.PAGE_SIZE_LIMITS]
    return _table(("routine", "backend", "page sizes it runs", "on", "source"), rows)


def render_vllm_attention_defaults() -> str:
    rows = []
    for r in dp.VLLM_ATTENTION_DEFAULTS:
        timed = f"{_code(r.backend)}: the same kernel" if r.backend else f"none: {r.missing}"
        fi = (_code(r.flashinfer_backend) if r.flashinfer_backend else r.flashinfer_note) if r.missing else ""
        rows.append((r.family, r.attention, r.phase, r.kv_dtype, r.kernel, timed, fi))
    return _table(("GPU", "attention", "phase", "KV dtype", "vLLM runs by default", "row that times it",
                   "vLLM's FLASHINFER backend (`vllm_flashinfer` rows)"), rows)


#: file -> block name -> renderer.
BLOCKS: dict[str, dict[str, Callable[[], str]]] = {
    "backends.md": {"backends": render_backends, "quant_formats": render_quant_formats,
                    "shape_limits": render_shape_limits},
    "padding.md": {"pad_rules": render_pad_rules, "vllm_limits": render_vllm_limits},
    "vllm_defaults.md": {"vllm_defaults": render_vllm_defaults},
    "attention.md": {"attention_backends": render_attention_backends,
                     "page_size_limits": render_page_size_limits,
                     "vllm_attention_defaults": render_vllm_attention_defaults},
}


def _block_re(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN GENERATED: {re.escape(name)} -->\n)(.*?)"
                      rf"(<!-- END GENERATED: {re.escape(name)} -->)", re.DOTALL)


def generated_block(text: str, name: str) -> str | None:
    """Content of block `name` in `text` (without the marker lines), or None when absent."""
    match = _block_re(name).search(text)
    return match.group(2) if match else None


def render_file(text: str, blocks: dict[str, Callable[[], str]]) -> str:
    """`text` with every generated block replaced by a fresh rendering."""
    for name, render in blocks.items():
        pattern = _block_re(name)
        if not pattern.search(text):
            raise ValueError(f"marker for generated block {name!r} is missing")
        text = pattern.sub(lambda m, render=render: m.group(1) + render() + "\n" + m.group(3), text)
    return text


def stale_files(references: str = REFERENCES) -> list[str]:
    """Reference files whose generated blocks differ from the code tables."""
    stale = []
    for fname, blocks in BLOCKS.items():
        path = os.path.join(references, fname)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if render_file(text, blocks) != text:
            stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render backends.py / padding.py tables into references/*.md.",
        allow_abbrev=False,
        epilog="e.g. cd scripts && python -m benchmark_model_kernels.docs_tables --write")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true",
                      help="exit 1 and list files whose generated tables are stale")
    mode.add_argument("--write", action="store_true",
                      help="rewrite the generated blocks in place (prose is kept)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path}", file=sys.stderr)
        return 1 if stale else 0
    for fname, blocks in BLOCKS.items():
        path = os.path.join(REFERENCES, fname)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = render_file(text, blocks)
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
