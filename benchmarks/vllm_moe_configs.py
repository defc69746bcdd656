"""vLLM's shipped Triton fused-MoE tile tables for NVIDIA GPUs, copied into the package.

vLLM's Triton MoE picks its tiles from `vllm/model_executor/layers/fused_moe/configs/<name>.json`
(`fused_moe.py: get_config_file_name`, `get_moe_configs`, `try_get_optimal_moe_config`); the GPU
machine that times the rows has no vLLM, so the tables travel with the package in
`scripts/benchmark_model_kernels/vllm_rules/moe_triton_configs.json`, which
`vllm_rules/moe_triton.py` reads. This script writes that file from an installed vLLM: every
shipped file whose device name starts with NVIDIA and whose dtype is one this tool's rows look up
(none: BF16; `fp8_w8a8`: the FP8 schemes; `_get_config_dtype_str` in fused_moe/config.py), each
M key in the file's own order (vLLM's nearest-M rule keeps the first key of a tie) as
[M, the six tile values], followed by a dict of any other launch keys the entry has (one L40S
table sets num_ctas), one line per file. `--check` compares the committed file with the installed
vLLM instead and exits 1 when they differ.

Needs vLLM importable (CPU is enough), e.g.:

  PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python benchmarks/vllm_moe_configs.py
  PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python benchmarks/vllm_moe_configs.py --check
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "scripts", "benchmark_model_kernels", "vllm_rules",
                   "moe_triton_configs.json")
#: The six keys of a config, in the order each row stores them after its M key.
CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
               "num_stages")


def _looked_up(name: str) -> bool:
    """Whether a row of this tool can ask for this file: no dtype (BF16) or dtype=fp8_w8a8."""
    dtype = next((part[len("dtype="):] for part in name[:-len(".json")].split(",")
                  if part.startswith("dtype=")), "")
    return dtype in ("", "fp8_w8a8")


def shipped_tables() -> tuple[str, dict[str, list[list]]]:
    """(vLLM version, {file name: [[M, BLOCK_SIZE_M, ..., num_stages(, {other keys})], ...]}) of
    the installed vLLM's NVIDIA tables; ValueError naming a file whose entry lacks one of the six."""
    import vllm
    import vllm.model_executor.layers.fused_moe as fused_moe

    folder = os.path.join(os.path.dirname(os.path.realpath(fused_moe.__file__)), "configs")
    tables: dict[str, list[list]] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)
        if ",device_name=NVIDIA_" not in name or not _looked_up(name):
            continue
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        doc.pop("triton_version", None)  # get_moe_configs drops it too
        rows = []
        for m, config in doc.items():
            missing = [k for k in CONFIG_KEYS if k not in config]
            if missing:
                raise ValueError(f"{name}: M={m} lacks {', '.join(missing)}")
            row: list = [int(m)] + [int(config[k]) for k in CONFIG_KEYS]
            extra = {k: v for k, v in config.items() if k not in CONFIG_KEYS}
            if extra:
                row.append(extra)
            rows.append(row)
        tables[name] = rows
    return vllm.__version__, tables


def render(version: str, tables: dict[str, list[list]]) -> str:
    """The JSON file's text: a header, then one line per shipped file."""
    head = {
        "vllm_version": version,
        "source": "vllm/model_executor/layers/fused_moe/configs/*.json with device_name=NVIDIA_* "
                  "and no dtype or dtype=fp8_w8a8, written by benchmarks/vllm_moe_configs.py",
        "row": ["M", *CONFIG_KEYS],
    }
    lines = [json.dumps(head, separators=(", ", ": "))[:-1] + ', "files": {']
    items = list(tables.items())
    for i, (name, rows) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        lines.append(f"  {json.dumps(name)}: {json.dumps(rows, separators=(',', ':'))}{comma}")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare the committed file with the installed vLLM; exit 1 if they differ")
    ap.add_argument("--out", default=OUT, help=f"file to write (default {OUT})")
    args = ap.parse_args(argv)
    version, tables = shipped_tables()
    text = render(version, tables)
    if args.check:
        with open(args.out, encoding="utf-8") as f:
            same = f.read() == text
        print(f"{args.out}: {'matches' if same else 'differs from'} vLLM {version} "
              f"({len(tables)} NVIDIA tables)")
        return 0 if same else 1
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.out}: {len(tables)} NVIDIA tables of vLLM {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
