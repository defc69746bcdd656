#!/usr/bin/env python3
"""vLLM's tuned fused-MoE config files for MODEL's per-rank shapes at one layout, tuned on this GPU.

    python scripts/tune_moe.py qwen3-30b-a3b --tp 1 --ep 8 --dry_run --device_name "NVIDIA H200"
    python scripts/tune_moe.py qwen3-30b-a3b --tp 1 --ep 8 --out ~/moe_configs
    VLLM_TUNED_CONFIG_FOLDER=~/moe_configs vllm serve Qwen/Qwen3-30B-A3B --enable-expert-parallel ...
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmark_model_kernels.run.tune_moe import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
