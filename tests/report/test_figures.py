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


def _sweep_run(model: str, bf16_us: float, fp8_us: float, width: float) -> dict:
    from helpers_report import gemm_row, results_of

    spread = lambda us: dict(p10_us=us - width, p50_us=us, p90_us=us + width, n_samples=30)  # noqa: E731
    rows = [gemm_row("qkv_proj", 64, "bf16", "torch", "torch.linear", bf16_us, **spread(bf16_us)),
            gemm_row("qkv_proj", 64, "fp8", "cudnn", "bmm_fp8", fp8_us, scheme="per_tensor", **spread(fp8_us))]
    return results_of(rows, gemms=("qkv_proj",), moe=False, model=dict(name=model, source="test",
                                                                          model_type="t", architecture="T"))


def test_a_model_sweep_draws_the_speedup_per_model_with_its_spread(tmp_path):
    from benchmark_model_kernels.report.figures import sweep_speedup

    runs = {"model-a": _sweep_run("model-a", 10.0, 5.0, 0.5), "model-b": _sweep_run("model-b", 10.0, 9.8, 1.0)}
    dirs = []
    for name, results in runs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(results))
        dirs.append(str(tmp_path / name))
    text = open(write_report(dirs, str(tmp_path / "cmp"))).read()
    assert "fig_speedup.png" in text and (tmp_path / "cmp" / "fig_speedup.png").stat().st_size > 1000
    a, b = (Analysis(r) for r in runs.values())
    value, low, high = sweep_speedup(a, "fp8.per_tensor", 64)
    assert value == 2.0 and low == 19.0 / 11.0 and high == 21.0 / 9.0
    assert sweep_speedup(b, "fp8.per_tensor", 64)[1] < 1.0 < sweep_speedup(b, "fp8.per_tensor", 64)[2]  # a tie
