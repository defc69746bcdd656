"""benchmarks/install_bytecode.py: which folders an install compiles (the standard library and
every site folder, a virtual environment inside the project too, never the project's own sources),
and that it writes their bytecode where Python will read it (sys.pycache_prefix), leaving a source
that does not compile as an install leaves it."""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "benchmarks", "install_bytecode.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import install_bytecode as ib  # noqa: E402


def _tree(tmp_path):
    project = tmp_path / "project"
    stdlib = tmp_path / "python" / "lib"
    for folder in (project / "scripts" / "pkg", project / ".venv" / "site-packages" / "torch",
                   stdlib / "site-packages", tmp_path / "carried"):
        folder.mkdir(parents=True)
    return project, stdlib


def test_the_folders_are_the_stdlib_and_site_folders_not_the_projects_own_sources(tmp_path, monkeypatch):
    project, stdlib = _tree(tmp_path)
    venv = project / ".venv" / "site-packages"
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": str(stdlib), "platstdlib": str(stdlib),
                                                         "purelib": str(venv), "platlib": str(venv)})
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(stdlib / "site-packages")])
    monkeypatch.setattr(sys, "path", [str(project), str(project / "scripts"), str(tmp_path / "carried"),
                                      str(tmp_path / "absent"), ""])
    folders = ib.installed_folders(str(project))
    # the stdlib once (its site-packages inside it), the venv inside the project, the carried wheels
    assert folders == sorted(os.path.realpath(p) for p in (stdlib, venv, tmp_path / "carried"))


def test_the_bytecode_goes_where_python_reads_it_and_a_bad_source_is_left(tmp_path, monkeypatch, capsys):
    site_dir = tmp_path / "site"
    (site_dir / "pkg").mkdir(parents=True)
    (site_dir / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (site_dir / "pkg" / "broken.py").write_text("def (:\n")
    prefix = tmp_path / "prefix"
    monkeypatch.setattr(sys, "pycache_prefix", str(prefix))
    monkeypatch.setattr(ib, "installed_folders", lambda project: [str(site_dir)])
    assert ib.main([]) == 0
    wanted = importlib.util.cache_from_source(str(site_dir / "pkg" / "__init__.py"))
    assert wanted.startswith(str(prefix)) and os.path.exists(wanted)
    assert not os.path.exists(importlib.util.cache_from_source(str(site_dir / "pkg" / "broken.py")))
    out = capsys.readouterr().out
    assert "files compiled into" in out and "not part of any timed run" in out and "do not compile" in out


def test_without_a_prefix_nothing_is_written(monkeypatch, capsys):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(ib, "installed_folders", lambda project: (_ for _ in ()).throw(AssertionError("walked")))
    assert ib.main([]) == 0
    assert "keep their own" in capsys.readouterr().out
