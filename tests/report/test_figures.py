"""figures.py: figures stay bounded in size and are drawn from analysis.py alone; side_by_side.py draws
them in forked processes, the same files."""

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


def test_figures_drawn_side_by_side_are_the_files_drawn_one_after_another(tmp_path, monkeypatch):
    from benchmark_model_kernels.report import side_by_side

    dirs = []
    for name, fp8_us in (("model-a", 5.0), ("model-b", 9.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(_sweep_run(name, 10.0, fp8_us, 0.5)))
        dirs.append(str(tmp_path / name))
    together = open(write_report(dirs, str(tmp_path / "par"))).read()
    monkeypatch.setattr(side_by_side, "MAX_DRAWERS", 1)
    in_turn = open(write_report(dirs, str(tmp_path / "ser"))).read()
    assert together == in_turn
    names = sorted(os.listdir(tmp_path / "ser"))
    assert sorted(os.listdir(tmp_path / "par")) == names and len([n for n in names if n.endswith(".png")]) >= 6
    for name in names:
        assert (tmp_path / "par" / name).read_bytes() == (tmp_path / "ser" / name).read_bytes(), name


def _fails() -> list:
    raise ValueError("this figure cannot be drawn")


def test_a_figure_that_fails_is_raised_here_and_no_drawer_is_left():
    import multiprocessing

    import pytest

    from benchmark_model_kernels.report import side_by_side

    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("drawers side by side need fork and two cores")
    assert side_by_side.draw_side_by_side([lambda: [("a", "a.png")], lambda: [("b", "b.png")]]) == [
        [("a", "a.png")], [("b", "b.png")]]
    with pytest.raises(ValueError, match="cannot be drawn"):
        side_by_side.draw_side_by_side([lambda: [("a", "a.png")], _fails])
    assert multiprocessing.active_children() == [] and side_by_side._PENDING == []


def _dispositions() -> list:
    import signal

    return [(repr(signal.getsignal(signal.SIGTERM)), repr(signal.getsignal(signal.SIGINT)))]


def test_drawers_die_on_sigterm_whatever_handler_the_run_has(monkeypatch):
    # A submitit job ignores SIGTERM; a drawer that inherited that handler outlived the
    # Pool's terminate, and the run's report waited on it for ever (a slurm sweep's job, once in
    # tests/run/test_launcher.py). The drawer takes SIGTERM's default and leaves Ctrl-C to the run.
    import multiprocessing
    import signal

    import pytest

    from benchmark_model_kernels.report import side_by_side

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("drawers side by side need fork")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)

    def hung(signum, frame):  # only a guard: the bug waits for ever, this fails it instead
        raise TimeoutError("draw_side_by_side still waits on its drawers")

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    guard = signal.signal(signal.SIGALRM, hung)
    signal.alarm(300)
    try:
        drawn = side_by_side.draw_side_by_side([_dispositions, _dispositions])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, guard)
        signal.signal(signal.SIGTERM, previous)
    assert drawn == [[(repr(signal.SIG_DFL), repr(signal.SIG_IGN))]] * 2
    assert multiprocessing.active_children() == []
