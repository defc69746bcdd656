"""The expected Blackwell (sm_100) plan: driver test lists for four models, planned with what each
FlashInfer release says about its backends, and checked by that release's own driver parser.

    python benchmarks/blackwell_plan.py examples/blackwell_plan \\
        --release v0.6.17=SITE_0617:CHECKOUT_0617 --release v0.6.18=SITE_0618:CHECKOUT_0618

SITE is a folder the release's wheel (and its dependencies) is installed into (pip install
--target), CHECKOUT a folder holding that release's benchmarks/ (empty for a release without a
driver: the plan is written, the parser check says why it is missing). Per release it writes, under
OUT/<release>/: capabilities.json (the FlashInfer answers the plan used: `capability_probe.py`
run in a child with SITE on PYTHONPATH), <model>.testlist.txt (the `--dry_run --assume_cc 10.0`
test list; the workdir path reads WORKDIR) and parser_check.json (every line through the
release's own `flashinfer_benchmark.parse_args`, imported from CHECKOUT in a child process; a GPU
is not needed to import it). tests/benchmarks/test_blackwell_plan.py regenerates the test lists
from the committed capabilities.json on a CPU and compares.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))

from benchmark_model_kernels.cases.attention import NO_ATTENTION  # noqa: E402
from benchmark_model_kernels.cases.build import build_cases  # noqa: E402
from benchmark_model_kernels.cases.capabilities import Capabilities, load_capabilities  # noqa: E402
from benchmark_model_kernels.core.results_schema import RunSettings  # noqa: E402
from benchmark_model_kernels.plan.planner import plan_model  # noqa: E402
from benchmark_model_kernels.run.flags import DEFAULT_MS  # noqa: E402
from benchmark_model_kernels.run.workdir import testlist_text  # noqa: E402

#: (bundled model, TP, EP): the deployments the Blackwell plan covers.
MODELS = (("llama-3.1-8b", 1, 1), ("qwen3-30b-a3b", 1, 1), ("deepseek-v3", 1, 8),
          ("gpt-oss-120b", 1, 1))
BLACKWELL = (10, 0)
#: The run settings of the plan (the defaults of a real run; the workdir is a placeholder).
SETTINGS = RunSettings(autotune_cache="WORKDIR/autotune_cache.json")

#: Run in the release's environment: every line of each test list through the driver's parser.
_PARSE = r"""
import contextlib, io, json, shlex, sys
import flashinfer, flashinfer_benchmark as fb
out = {"flashinfer": flashinfer.__version__, "files": {}}
for path in sys.argv[1:]:
    runnable = skipped = 0
    rejected = []
    for line in open(path):
        line = line.strip()
        if not line or (line.startswith("#") and not line.startswith("# unsupported")):
            continue
        argv_text = line[line.rindex("): --routine") + 3:] if line.startswith("#") else line
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                fb.parse_args(shlex.split(argv_text))
        except SystemExit:
            rejected.append({"line": argv_text, "error": err.getvalue().strip()[-400:],
                             "skipped": line.startswith("#")})
        if line.startswith("#"):
            skipped += 1
        else:
            runnable += 1
    out["files"][path.rsplit("/", 1)[-1]] = {"runnable": runnable, "skipped": skipped,
                                              "rejected": rejected}
print(json.dumps(out))
"""


def plan_testlist(model: str, tp: int, ep: int, caps: Capabilities) -> str:
    """The --dry_run --assume_cc 10.0 test list of one deployment under `caps`: its GEMM and MoE
    lines. The attention lines are left out: the committed capabilities.json files were probed
    before the probe asked about the attention routines, so they hold no driver table for them and
    the plan would fall back to the 0.6.18 hand table for every release."""
    plan = plan_model(model, tp, ep)
    return testlist_text(build_cases(plan, DEFAULT_MS, compute_capability=BLACKWELL, caps=caps,
                                     attention=NO_ATTENTION), SETTINGS)


def testlist_name(model: str, tp: int, ep: int) -> str:
    return f"{model}_tp{tp}_ep{ep}.testlist.txt"


def parser_check(site: str, checkout: str, files: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": site, "FLASHINFER_NO_DOWNLOAD": "1"}
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", _PARSE, *files], cwd=os.path.join(
        checkout, "benchmarks"), env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        raise SystemExit(f"parser check failed in {checkout}: {r.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="output folder, e.g. examples/blackwell_plan")
    p.add_argument("--release", action="append", default=[], metavar="TAG=SITE:CHECKOUT",
                   help="a FlashInfer release to plan with, e.g. v0.6.18=/tmp/site618:/tmp/fi618")
    a = p.parse_args(argv)
    summary = {}
    for spec in a.release:
        tag, _, paths = spec.partition("=")
        site, _, checkout = paths.partition(":")
        os.environ["PYTHONPATH"] = site  # the probe child imports this release's wheel
        caps = load_capabilities(checkout)
        if not caps.flashinfer:
            raise SystemExit(f"{tag}: FlashInfer did not answer: {caps.origin}")
        folder = os.path.join(a.out, tag)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "capabilities.json"), "w") as f:
            json.dump(caps.to_dict(), f, indent=1)
            f.write("\n")
        files = []
        for model, tp, ep in MODELS:
            path = os.path.join(folder, testlist_name(model, tp, ep))
            with open(path, "w") as f:
                f.write(plan_testlist(model, tp, ep, caps))
            files.append(os.path.abspath(path))
        check = parser_check(site, checkout, files) if checkout else {
            "flashinfer": caps.flashinfer, "driver": None,
            "why": "no driver: this release's wheels and sdist ship no benchmarks/ and no tag of it "
                   "is in the FlashInfer mirror the plan was made from",
            "files": {os.path.basename(f): None for f in files}}
        with open(os.path.join(folder, "parser_check.json"), "w") as f:
            json.dump(check, f, indent=1)
            f.write("\n")
        if not checkout:
            print(f"{tag} (flashinfer {caps.flashinfer}): planned; no driver parser to run")
            continue
        summary[tag] = {name: (v["runnable"], v["skipped"], len(v["rejected"]))
                        for name, v in check["files"].items()}
        print(f"{tag} (flashinfer {check['flashinfer']}): " + "; ".join(
            f"{n}: {r} to run, {s} skipped, {x} rejected" for n, (r, s, x) in summary[tag].items()))
    return 1 if any(x for v in summary.values() for (_, _, x) in v.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
