"""vLLM's shipped Triton tile tables for NVIDIA GPUs, copied into the package.

Two of vLLM's Triton kernels take their tiles from JSON files it ships, one file per shape and GPU:

* the fused MoE: `vllm/model_executor/layers/fused_moe/configs/<name>.json` (`fused_moe.py:
  get_config_file_name`, `get_moe_configs`, `try_get_optimal_moe_config`), carried as
  `vllm_rules/moe_triton_configs.json` and read by `vllm_rules/moe_triton.py`: every shipped file
  whose device name starts with NVIDIA and whose dtype is one this tool's rows look up (none: BF16;
  `fp8_w8a8`: the FP8 schemes; `_get_config_dtype_str` in fused_moe/config.py);
* the block-FP8 dense GEMM: `vllm/model_executor/layers/quantization/utils/configs/<name>.json`
  (`fp8_utils.py: get_w8a8_block_fp8_configs`, `w8a8_triton_block_scaled_mm`), carried as
  `vllm_rules/block_fp8_gemm_configs.json` and read by `vllm_rules/block_fp8_gemm.py`: every NVIDIA
  file of `dtype=fp8_w8a8,block_shape=[128,128]`, the checkpoints this tool's rows take.

The GPU machine that times the rows has no vLLM, so the tables travel with the package. Each file
is one line per shipped table, each M key in the table's own order (vLLM's nearest-M rule keeps
the first key of a tie) as [M, the six tile values], followed by a dict of any other launch keys
the entry has (one L40S MoE table sets num_ctas). `--check` compares the committed files with the
installed vLLM instead and exits 1 when one differs.

Needs vLLM importable (CPU is enough), e.g.:

  PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python benchmarks/vllm_tile_tables.py
  PYTHONPATH=scripts VLLM_TARGET_DEVICE=cpu /work/venv-vllm/bin/python benchmarks/vllm_tile_tables.py --check
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(os.path.dirname(HERE), "scripts", "benchmark_model_kernels", "vllm_rules")
#: The six keys of a config, in the order each row stores them after its M key.
CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
               "num_stages")


def _moe_looked_up(name: str) -> bool:
    """Whether a MoE row of this tool can ask for this file: no dtype (BF16) or dtype=fp8_w8a8."""
    dtype = next((part[len("dtype="):] for part in name[:-len(".json")].split(",")
                  if part.startswith("dtype=")), "")
    return dtype in ("", "fp8_w8a8")


def _block_fp8_looked_up(name: str) -> bool:
    """Whether a block-FP8 GEMM row can ask for this file: 128x128 blocks (GROUP in
    kernels/triton_fp8_gemm.py)."""
    return name.endswith(",dtype=fp8_w8a8,block_shape=[128,128].json")


#: name: (folder inside the vllm package, the file it writes, which files it keeps, its source line).
TABLES = {
    "moe": ("model_executor/layers/fused_moe/configs", "moe_triton_configs.json", _moe_looked_up,
            "vllm/model_executor/layers/fused_moe/configs/*.json with device_name=NVIDIA_* and no "
            "dtype or dtype=fp8_w8a8"),
    "block_fp8": ("model_executor/layers/quantization/utils/configs", "block_fp8_gemm_configs.json",
                  _block_fp8_looked_up,
                  "vllm/model_executor/layers/quantization/utils/configs/*.json with "
                  "device_name=NVIDIA_* and dtype=fp8_w8a8,block_shape=[128,128]"),
}


def shipped_tables(table: str = "moe") -> tuple[str, dict[str, list[list]]]:
    """(vLLM version, {file name: [[M, BLOCK_SIZE_M, ..., num_stages(, {other keys})], ...]}) of
    the installed vLLM's NVIDIA tables of `table` (a TABLES key); ValueError naming a file whose
    entry lacks one of the six."""
    import vllm

    sub, _, keep, _ = TABLES[table]
    folder = os.path.join(os.path.dirname(os.path.realpath(vllm.__file__)), *sub.split("/"))
    tables: dict[str, list[list]] = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)
        if ",device_name=NVIDIA_" not in name or not keep(name):
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


def render(version: str, tables: dict[str, list[list]], table: str = "moe") -> str:
    """The JSON file's text: a header, then one line per shipped file."""
    head = {
        "vllm_version": version,
        "source": f"{TABLES[table][3]}, written by benchmarks/vllm_tile_tables.py",
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
                    help="compare the committed files with the installed vLLM; exit 1 if one differs")
    ap.add_argument("--out_dir", default=RULES, help=f"folder to write the files in (default {RULES})")
    args = ap.parse_args(argv)
    rc = 0
    for table, (_, file_name, _, _) in TABLES.items():
        version, tables = shipped_tables(table)
        text = render(version, tables, table)
        out = os.path.join(args.out_dir, file_name)
        if args.check:
            try:
                with open(out, encoding="utf-8") as f:
                    same = f.read() == text
            except FileNotFoundError:
                same = False
            print(f"{out}: {'matches' if same else 'differs from'} vLLM {version} "
                  f"({len(tables)} NVIDIA tables)")
            rc |= 0 if same else 1
            continue
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {out}: {len(tables)} NVIDIA tables of vLLM {version}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
