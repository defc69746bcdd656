"""The skill bundle holds together: SKILL.md conventions, references that exist, console scripts that
import, CLIs that accept the flags the docs use, README == CI, and the results schema doc == code."""

from __future__ import annotations

import glob
import importlib
import os
import re
import shlex
import subprocess
import sys

import pytest

from benchmark_model_kernels.core.results_schema import CSV_COLUMNS
from support import ROOT


def read(rel: str) -> str:
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Split `---\\nkey: value\\n---\\nbody` (one-line values, as SKILL.md uses)."""
    m = re.match(r"---\n(.*?)\n---\n(.*)", text, re.S)
    assert m, "SKILL.md must start with a --- frontmatter block"
    meta = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        assert sep, f"frontmatter line without 'key: value': {line!r}"
        meta[key.strip()] = value.strip()
    return meta, m.group(2)


# ---------------------------------------------------------------- SKILL.md


def test_skill_frontmatter_follows_the_skill_conventions():
    meta, body = frontmatter(read("SKILL.md"))
    assert set(meta) <= {"name", "description", "license", "compatibility"}
    assert meta["name"] == "benchmark-model-kernels"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    desc = meta["description"]
    assert 0 < len(desc) <= 1024
    assert "<" not in desc and ">" not in desc
    # Third person: starts with a verb in -s form, no first/second person.
    first = desc.split()[0]
    assert first[0].isupper() and first.endswith("s"), first
    assert not re.search(r"\b(I|me|my|we|our|you|your)\b", desc), desc
    # Says when not to use it.
    assert "Not for end-to-end serving throughput" in desc
    assert len(body.splitlines()) < 500


def test_skill_interview_covers_every_decision_with_defaults():
    _, body = frontmatter(read("SKILL.md"))
    for heading in ("Model", "TP and EP", "M sweep", "Preview", "doctor", "Plumbing run",
                    "Full run", "Report"):
        assert re.search(rf"^### \d+\. .*{heading}", body, re.M), heading
    for preset in ("1 8 64 512", "1 4 16 32", "64 256 1024 4096", "M x EP/TP"):
        assert preset in body
    assert body.count("default") >= 5
    # What the numbers are and are not: attention and its KV cache are timed; communication, the
    # KV-cache write, scheduling and real routing are not.
    flat = " ".join(body.split())
    for caveat in ("GEMMs, fused MoE and attention over the timed KV cache lengths", "no communication",
                   "no KV-cache write", "scheduling", "synthetic uniform routing"):
        assert caveat in flat, caveat


def _linked_references() -> set[str]:
    names = set()
    for rel in ("SKILL.md", "README.md", os.path.join("references", "README.md")):
        text = read(rel)
        names |= set(re.findall(r"references/([\w.-]+\.md)", text))
        if rel.startswith("references"):
            names |= set(re.findall(r"\]\(([\w.-]+\.md)\)", text))
    return names


def test_every_linked_reference_exists():
    missing = sorted(n for n in _linked_references()
                     if not os.path.isfile(os.path.join(ROOT, "references", n)))
    assert not missing, f"linked but missing in references/: {missing}"


def test_every_reference_is_indexed():
    index = read(os.path.join("references", "README.md"))
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "references"))
                   if f.endswith(".md") and f != "README.md")
    assert files
    unlisted = [f for f in files if f"]({f})" not in index]
    assert not unlisted, f"references/README.md does not list {unlisted}"


#: Documentation whose citations must resolve inside the repository (examples/ is evidence: its
#: reports quote the commands as they ran, machine paths included).
DOCS = ("README.md", "SKILL.md", *(os.path.join("references", f) for f in sorted(
    os.listdir(os.path.join(ROOT, "references"))) if f.endswith(".md")))
#: A path into the repository as the docs cite it: scripts/..., tests/..., benchmarks/..., examples/...
REPO_PATH = re.compile(r"(?<![\w/.])((?:scripts|tests|benchmarks|examples|references)/[\w./-]*\w)(\*?)")
#: Paths inside a FlashInfer source checkout (the driver the runner drives), not in this repository.
FLASHINFER_PATHS = ("benchmarks/flashinfer_benchmark.py", "benchmarks/routines/")


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_cites_is_in_the_repository(doc):
    text = read(doc)
    missing = []
    for cited, star in sorted(set(REPO_PATH.findall(text))):
        path = cited.split("::")[0]
        if path.startswith(FLASHINFER_PATHS):
            continue
        if star:
            if not glob.glob(os.path.join(ROOT, path + "*")):
                missing.append(cited + star)
        elif not os.path.exists(os.path.join(ROOT, path)):
            missing.append(cited)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        if not os.path.exists(os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), target))):
            missing.append(target)
    assert not missing, f"{doc} cites what the repository does not hold: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_no_doc_points_outside_the_repository(doc):
    text = read(doc)
    # ../shared/configs is named only as what some tests read when it is there (they skip without it)
    outside = re.findall(r"(?:/work/|/root/|/home/\w+/|\.\./shared/(?!configs)|shared/research/)\S*", text)
    assert not outside, f"{doc} points at files that do not ship: {outside}"


# ---------------------------------------------------------------- commands in the docs


def _commands(text: str) -> list[list[str]]:
    """Every `python .../scripts/<name>.py ...` command in the text (continuations joined)."""
    text = text.replace("\\\n", " ")
    out = []
    for m in re.finditer(r'python3? "?(?:\$SKILL_DIR/)?scripts/(\w+\.py)"?([^\n`|]*)', text):
        out.append([m.group(1), *shlex.split(m.group(2).split("#")[0], posix=True)])
    return out


def _help(script: str) -> str:
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), "--help"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{script} --help failed: {r.stderr[-2000:]}"
    return r.stdout


@pytest.mark.parametrize("doc", ["SKILL.md", "README.md", "references/troubleshooting.md"])
def test_doc_commands_use_scripts_and_flags_that_exist(doc):
    cmds = _commands(read(doc))
    assert cmds, f"no commands found in {doc}"
    helps: dict[str, str] = {}
    for script, *args in cmds:
        assert os.path.isfile(os.path.join(ROOT, "scripts", script)), f"{doc}: scripts/{script}"
        if script not in helps:
            helps[script] = _help(script)
        for flag in (a for a in args if a.startswith("--")):
            assert re.search(rf"(^|[\s\[]){re.escape(flag)}\b", helps[script]), \
                f"{doc}: {script} has no {flag}"


def test_pyproject_console_scripts_import():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    scripts = project["scripts"]
    assert set(scripts) == {"benchmark-model", "benchmark-via-builtin", "benchmark-check-env",
                            "benchmark-report", "benchmark-deploy"}
    for name, target in scripts.items():
        module, _, attr = target.partition(":")
        mod = importlib.import_module(module)
        assert callable(getattr(mod, attr, None)), f"{name} -> {target}: no callable {attr}"
    assert {"gpu", "gpu-cu13", "dev"} <= set(project["optional-dependencies"])
    for extra in ("gpu", "gpu-cu13"):
        deps = " ".join(project["optional-dependencies"][extra])
        for dist in ("flashinfer-python", "nvidia-ml-py"):
            assert dist in deps, (extra, dist)


#: cupti-python releases on PyPI (pip index versions cupti-python): 12.6.0, 12.8.0, 13.0.0, 13.0.1,
#: 13.2.0, 13.3.0, 13.3.1, 13.4.0.
CUPTI_PYTHON_RELEASES = ("12.6.0", "12.8.0", "13.0.0", "13.0.1", "13.2.0", "13.3.0", "13.3.1", "13.4.0")


def _cupti_spec(deps: list[str]):
    from packaging.specifiers import SpecifierSet

    spec = [d[len("cupti-python"):] for d in deps if d.startswith("cupti-python")]
    return SpecifierSet(spec[0]) if spec else None


def test_gpu_extras_resolve_on_cuda_12_and_13():
    """`gpu` names no cupti-python, so a CUDA 12 stack (whose cupti-python is 12.x) resolves it with
    any cupti-python or none; `gpu-cu13` admits every 13.x release and no 12.x one."""
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert _cupti_spec(extras["gpu"]) is None
    cu13 = _cupti_spec(extras["gpu-cu13"])
    assert cu13 is not None
    assert [v for v in CUPTI_PYTHON_RELEASES if v in cu13] == [v for v in CUPTI_PYTHON_RELEASES
                                                               if v.startswith("13.")]
    for doc in ("README.md", "SKILL.md"):
        text = read(doc)
        assert re.search(r"pip install -e \S*\[gpu-cu13\]\S* .*'cupti-python==13\.0\.\*'", text), doc
        assert re.search(r"\[gpu\]", text), doc  # the CUDA 12 install
        # The CUPTI rule, stated: cupti-python >= 13, pinned to the runtime's major.minor beside its
        # own nvidia-cuda-cupti; another can fall back to CUDA events.
        flat = " ".join(text.split())
        assert "nvidia-cuda-cupti 13.0.85" in flat and "fall back to CUDA" in flat, doc
        assert "--allow_cuda_events" in flat, doc


def test_thin_cli_scripts_exist():
    for script in ("benchmark_model.py", "benchmark_via_builtin.py", "check_env.py", "report.py", "deploy.py",
                   "tune_moe.py"):
        text = read(os.path.join("scripts", script))
        assert "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))" in text, script
        assert len(text.splitlines()) < 30, f"{script} should stay a thin CLI"


# ---------------------------------------------------------------- README == CI


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash)?\n(.*?)```", text, re.S)


#: README's CPU torch step: PyTorch's CPU index (PyPI's default Linux torch is the CUDA build).
CPU_TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def test_readme_opens_with_the_two_commands_and_ci_runs_them():
    readme = read("README.md")
    head = "\n".join(readme.splitlines()[:12])
    blocks = _code_blocks(head)
    assert len(blocks) == 2, "README must open with the set-up+preview command and the test command"
    setup, test_cmd = blocks[0].strip(), blocks[1].strip()
    steps = [s.strip() for s in setup.split("&&")]
    # The user install: the CPU torch first (before the package could pull PyPI's CUDA torch), then
    # the package without the dev tools, then the preview.
    assert CPU_TORCH in steps and "pip install -e ." in steps
    assert steps.index(CPU_TORCH) < steps.index("pip install -e .")
    assert "[dev]" not in setup
    assert re.search(r"scripts/benchmark_model\.py \S+ --tp 1 --print_only$", setup)
    # The dev install, then the tests.
    test_steps = [s.strip() for s in test_cmd.split("&&")]
    assert test_steps[0] == "pip install -e '.[dev]'" and test_steps[-1] == "python -m pytest -q -rs"
    ci = read(".ci/run")
    ci_lines = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    # CI installs as the README says (same pip steps, quiet flags aside; the torch step from CI's own
    # CPU wheel mirror, as CI reaches no index but PyPI's) ...
    for step in [*steps, *test_steps]:
        if step.startswith("pip install"):
            step = "pip install torch==2.13.0" if step == CPU_TORCH else step
            assert any(ln.startswith("pip install") and ln.endswith(step[len("pip install"):])
                       for ln in ci_lines), f".ci/run lacks: {step}"
    assert "python3 -m venv .venv" in ci_lines and ". .venv/bin/activate" in ci_lines
    # ... and runs exactly the README's test command, last, under `set -e`.
    assert ci_lines[-1] == test_steps[-1]
    assert "set -euo pipefail" in ci


def test_readme_preview_command_runs_offline():
    """The main job of the first README command, as a new user runs it (already installed here)."""
    setup = _code_blocks(read("README.md"))[0].strip()
    preview = setup.split("&&")[-1].strip()
    argv = shlex.split(preview)
    assert argv[0] == "python"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    r = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "qkv_proj" in r.stdout and "Traceback" not in r.stderr


# ---------------------------------------------------------------- results schema doc == code


def test_results_schema_lists_exactly_the_csv_columns():
    text = read(os.path.join("references", "results_schema.md"))
    section = text.split("## `combined_results.csv`", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert tuple(documented) == CSV_COLUMNS


#: Flags in the docs that belong to other programs (vllm serve, git, pip, python -m venv).
FOREIGN_FLAGS = {"--tensor-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
                 "--depth", "--branch", "--system-site-packages", "--target", "--no-deps",
                 "--help", "--index-url", "--extra-index-url", "--version", "--no-index"}


@pytest.mark.parametrize("doc", ["SKILL.md", "README.md", "references/troubleshooting.md"])
def test_every_flag_the_docs_mention_exists_in_some_cli(doc):
    """Catches prose drift such as --trust_remote_code vs --trust-remote-code."""
    helps = " ".join(_help(s) for s in ("benchmark_model.py", "benchmark_via_builtin.py",
                                        "check_env.py", "report.py", "deploy.py", "tune_moe.py"))
    mentioned = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*[a-z0-9]", read(doc))) - FOREIGN_FLAGS
    unknown = sorted(f for f in mentioned if not re.search(rf"(^|[\s\[]){re.escape(f)}\b", helps))
    assert not unknown, f"{doc} mentions flags no CLI has: {unknown}"


# ---------------------------------------------------------------- the FlashInfer pair == code


def test_readme_skill_and_extras_name_the_flashinfer_pairs():
    """README.md and SKILL.md install FLASHINFER_WHEEL and clone its tag for the tool alone, name
    vLLM's own pin (VLLM_FLASHINFER_PINS) and its tag for a vLLM environment, name no other
    FlashInfer release, and pyproject's `gpu` extras admit exactly the supported release lines."""
    tomllib = pytest.importorskip("tomllib")
    from packaging.specifiers import SpecifierSet

    from benchmark_model_kernels.env import versions

    wheel, tag = versions.FLASHINFER_WHEEL, versions.release_tag(versions.FLASHINFER_WHEEL)
    vllm_version, vllm_pin = next(iter(versions.VLLM_FLASHINFER_PINS.items()))
    for doc in ("README.md", "SKILL.md"):
        text = read(doc)
        flat = " ".join(text.split())
        assert f"'flashinfer-python=={wheel}'" in text, doc
        assert f"git clone --depth 1 --branch {tag} {versions.FLASHINFER_GIT_URL}" in text, doc
        pins = set(re.findall(r"flashinfer-python==([\w.]+)", text))
        assert pins == {wheel}, f"{doc} pins {pins}"
        tags = set(re.findall(r"--branch (v[\w.]+)", text))
        assert tags <= {tag, versions.release_tag(vllm_pin)} and tag in tags, f"{doc} clones {tags}"
        # Inside vLLM: keep its FlashInfer, its tag's driver or --no_driver.
        assert f"vLLM {vllm_version} requires flashinfer-python {vllm_pin}" in flat, doc
        assert versions.release_tag(vllm_pin) in flat and "--no_driver" in flat, doc
        assert "release vLLM pins" not in flat, doc
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for extra in ("gpu", "gpu-cu13"):
        spec = SpecifierSet(next(d for d in extras[extra]
                                 if d.startswith("flashinfer-python"))[len("flashinfer-python"):])
        assert wheel in spec and vllm_pin in spec
        for version in ("0.6.17", "0.6.18", "0.6.18.post1", "0.7.0", "0.7.4"):
            assert version in spec and versions.supported_line(version), version
        for version in ("0.6.16.post4", "0.8.0"):
            assert version not in spec and versions.supported_line(version) is None, version


#: Sentences that once said attention and the KV cache are not timed; both are (cases/attention).
NOT_TIMED_ATTENTION = ("the KV cache and attention", "no attention or KV cache", "attention or KV-cache kernels")


def test_docs_say_attention_and_the_kv_cache_are_timed():
    from benchmark_model_kernels.cases import attention  # noqa: F401  (the cases the docs describe)

    for doc in ("README.md", "SKILL.md"):
        flat = " ".join(read(doc).split())
        for sentence in NOT_TIMED_ATTENTION:
            assert sentence not in flat, f"{doc}: {sentence!r}"
    readme = " ".join(read("README.md").split())
    assert "These numbers are **kernel times only**, one rank's: GEMMs, fused MoE and attention" in readme
    meta, _ = frontmatter(read("SKILL.md"))
    assert "attention" in meta["description"] and "KV cache" in meta["description"]


# ---------------------------------------------------------------- long references have a TOC


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", [d for d in DOCS if d.startswith("references")])
def test_every_reference_over_100_lines_opens_with_a_table_of_contents(doc):
    text = read(doc)
    if len(text.splitlines()) <= 100:
        return
    assert "\n## Contents\n" in text, f"{doc} has no '## Contents'"
    toc = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\(#([^)]+)\)", toc)
    headings = [h for h in re.findall(r"^## (.+)$", text, re.M) if h != "Contents"]
    assert linked == [_anchor(h) for h in headings], f"{doc}: the contents list and the headings differ"
