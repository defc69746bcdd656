"""Test set-up: import the package from scripts/ (no install needed) and the shared test helpers
(`support`, `helpers_runner`) from tests/. The test folders mirror the package's stage folders."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(TESTS), "scripts"))
sys.path.insert(0, TESTS)

# The tool keeps plans, FlashInfer's capability answers and timed rows under $XDG_CACHE_HOME; a test
# session gets a folder of its own (child processes inherit it), never the user's.
_CACHE_HOME = tempfile.mkdtemp(prefix="bmk-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME
atexit.register(shutil.rmtree, _CACHE_HOME, True)
