"""The floor plan (pyproject.toml [tool.importlinter]) holds, and the check really fails on a
module that imports from a floor above its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "scripts" / "benchmark_model_kernels"


def _lint_imports(scripts: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(scripts)}
    return subprocess.run([exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_package_keeps_its_floor_plan():
    out = _lint_imports(ROOT / "scripts", ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 kept, 0 broken" in out.stdout


def test_an_import_from_a_floor_above_fails_the_check(tmp_path):
    scripts = tmp_path / "scripts"
    shutil.copytree(PACKAGE, scripts / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = scripts / PACKAGE.name / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom ..report import markdown  # noqa: E402,F401\n")
    out = _lint_imports(scripts, tmp_path)
    assert out.returncode != 0
    assert "benchmark_model_kernels.core.errors -> benchmark_model_kernels.report.markdown" in out.stdout
