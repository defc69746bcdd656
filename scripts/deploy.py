#!/usr/bin/env python3
"""Which layout (TP, DP, EP) and recipe serves a model best on G GPUs at a load, one decode step each.

    python scripts/deploy.py qwen3-30b-a3b --gpus 8xH200 --batch 8 64 256 1024 --context 4096 --dry_run
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmark_model_kernels.deploy.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
