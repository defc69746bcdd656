#!/usr/bin/env python3
"""Write report.md and PNG figures from one or several benchmark workdirs (reads results.json only).

    python scripts/report.py runs/llama8b
    python scripts/report.py runs/llama8b_tp1 runs/llama8b_tp2 --out runs/compare
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmark_model_kernels.run.interrupts import stop_signals_exit  # noqa: E402  (standard library only)

# A stop signal while the package loads (seconds on a busy machine) is one line, never a traceback.
with stop_signals_exit("while starting; nothing was written"):
    from benchmark_model_kernels.report.report import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
