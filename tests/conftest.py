"""Test set-up: import the package from scripts/ (no install needed) and the shared test helpers
(`support`, `helpers_runner`) from tests/. The test folders mirror the package's stage folders."""

from __future__ import annotations

import os
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(TESTS), "scripts"))
sys.path.insert(0, TESTS)
