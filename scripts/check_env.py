#!/usr/bin/env python3
"""The environment doctor: can this machine produce trustworthy kernel times? (see --help)"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmark_model_kernels.run.interrupts import stop_signals_exit  # noqa: E402  (standard library only)

# A stop signal while the package loads (seconds on a busy machine) is one line, never a traceback.
with stop_signals_exit("while starting; nothing was written"):
    from benchmark_model_kernels.doctor.doctor import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
