"""figures.py: figures stay bounded in size and are drawn from analysis.py alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers_report import ROOT, fixture

from benchmark_model_kernels.report.analysis import Analysis
from benchmark_model_kernels.report.report import write_report


def test_time_vs_m_figures_stay_bounded(tmp_path):
    base = fixture("tiny_mixed")
    proto = next(r for r in base["rows"] if r["status"] == "ok" and r["kind"] == "gemm")
    rows = [dict(proto, name=f"mod{i}", case_id=f"gemm.mod{i}.m{m}", m=m) for i in range(14) for m in (1, 8)]
    results = dict(base, rows=rows, plan=None)
    wd = tmp_path / "big"
    wd.mkdir()
    (wd / "results.json").write_text(json.dumps(results))
    text = open(write_report([str(wd)])).read()
    assert "fig_time_vs_m_1.png" in text and "fig_time_vs_m_2.png" in text  # 12 + 2 panels
    assert len(Analysis(results).entries) == 14


def test_figures_import_neither_the_cli_nor_matplotlib():
    # matplotlib loads when a figure is drawn; figures.py reads the analysis only, never report.py
    code = (f"import sys; sys.path.insert(0, {os.path.join(ROOT, 'scripts')!r})\n"
            "import benchmark_model_kernels.report.figures\n"
            "print(sorted(m for m in ('matplotlib', 'benchmark_model_kernels.report.report', "
            "'benchmark_model_kernels.report.markdown') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
