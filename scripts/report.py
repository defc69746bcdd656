#!/usr/bin/env python3
"""Write report.md and PNG figures from one or several benchmark workdirs (reads results.json only).

    python scripts/report.py runs/llama8b
    python scripts/report.py runs/llama8b_tp1 runs/llama8b_tp2 --out runs/compare
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmark_model_kernels.report.report import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
