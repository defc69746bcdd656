"""The report CLI never replaces files it did not write: a report.md without report.py's footer,
or stray fig_*.png, in --out are refused unless --force; its own report is rebuilt in place. A
full disk is one line and keeps the old report.md; WORKDIR and --out expand `~` and `$VAR`."""

from __future__ import annotations

import errno
import os

from helpers_report import workdir

from benchmark_model_kernels.report import report


def one_error_line(rc, err):
    """Exit 2, and stderr exactly one `error:` line (no traceback); returns that line."""
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err
    return err.rstrip("\n")


def test_a_report_md_report_py_did_not_write_is_refused_unless_force(tmp_path, capsys):
    wd = workdir(tmp_path, "tiny_mixed")
    out = tmp_path / "notes"
    out.mkdir()
    (out / "report.md").write_bytes(b"# my own notes\n")
    (out / "fig_mine.png").write_bytes(b"not a plot")
    line = one_error_line(report.main([wd, "--out", str(out)]), capsys.readouterr().err)
    assert line == (f"error: --out={out}: holds a report.md that report.py did not write; pass --force to "
                    "replace it (and the fig_*.png there), or choose another --out")
    assert sorted(os.listdir(out)) == ["fig_mine.png", "report.md"]
    assert (out / "report.md").read_bytes() == b"# my own notes\n"
    assert report.main([wd, "--out", str(out), "--force"]) == 0
    assert report.GENERATED_BY in (out / "report.md").read_text()


def test_its_own_report_is_rebuilt_in_place(tmp_path, capsys):
    wd = workdir(tmp_path, "tiny_mixed")
    assert report.main([wd]) == 0  # the workdir's own report, as the run wrote it
    assert report.main([wd]) == 0
    out = tmp_path / "cmp"
    assert report.main([wd, "--out", str(out)]) == 0
    assert report.main([wd, "--out", str(out)]) == 0


def test_stray_figures_outside_a_workdir_are_refused(tmp_path, capsys):
    wd = workdir(tmp_path, "tiny_mixed")
    out = tmp_path / "pictures"
    out.mkdir()
    (out / "fig_roofline.png").write_bytes(b"mine")
    line = one_error_line(report.main([wd, "--out", str(out)]), capsys.readouterr().err)
    assert line == (f"error: --out={out}: holds fig_roofline.png but no report.md of report.py; pass "
                    "--force to replace such figures, or choose another --out")
    assert (out / "fig_roofline.png").read_bytes() == b"mine"
    # In a workdir its figures are its own, even if its report.md was never written.
    with open(os.path.join(wd, "fig_roofline.png"), "wb") as f:
        f.write(b"half a report")
    assert report.main([wd]) == 0


def test_a_full_disk_is_one_line_and_the_old_report_stays(tmp_path, capsys, monkeypatch):
    wd = workdir(tmp_path, "tiny_mixed")
    assert report.main([wd]) == 0
    md = os.path.join(wd, "report.md")
    before = open(md, "rb").read()
    capsys.readouterr()

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    line = one_error_line(report.main([wd]), capsys.readouterr().err)
    assert line.startswith(f"error: --out={wd}: disk full writing {wd}/fig_")
    assert line.endswith(".png (No space left on device); free space and run report.py again")
    assert open(md, "rb").read() == before
    assert not [f for f in os.listdir(wd) if f.endswith(".tmp")]


def test_an_unwritable_out_is_one_line(tmp_path, capsys):
    wd = workdir(tmp_path, "tiny_mixed")
    line = one_error_line(report.main([wd, "--out", "/proc/report"]), capsys.readouterr().err)
    assert line.startswith("error: --out=/proc/report: cannot be written (")


def test_workdir_and_out_expand_home_and_variables(tmp_path, capsys, monkeypatch):
    wd = workdir(tmp_path, "tiny_mixed")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OUT_DIR", str(tmp_path / "o"))
    rel = os.path.relpath(wd, tmp_path)
    assert report.main([f"~/{rel}", "--out=$OUT_DIR"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o" / "report.md")
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    line = one_error_line(report.main(["$NOPE_NOT_SET/w"]), capsys.readouterr().err)
    assert line == ("error: WORKDIR=$NOPE_NOT_SET/w: environment variable $NOPE_NOT_SET is not set; set "
                    "it, or write the path out")
