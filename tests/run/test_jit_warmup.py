"""The JIT warm-up (run/jit_warmup.py): which cases stand for a kernel family, the record of warmed
families per set of JIT caches, and a run through the real worker pool with the stand-in driver
(plumbing only: its numbers are synthetic), where the warm-up runs once per family and never
becomes a row."""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace

import pytest

from benchmark_model_kernels.cases.attention import AttentionSweep
from benchmark_model_kernels.cases.build import build_cases
from benchmark_model_kernels.core.results_schema import RunSettings, load_results
from benchmark_model_kernels.plan import planner
from benchmark_model_kernels.run import jit_warmup as jw
from benchmark_model_kernels.run import phases, runner
from benchmark_model_kernels.run.outcome import WorkerReply
from builders import gemm_case, moe_case
from helpers_runner import by_id, run_request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MACHINE = {"versions": {"flashinfer_wheel": "0.6.18.post1", "torch": "2.11.0"},
           "gpu": {"name": "NVIDIA H200", "compute_capability": "9.0"}}


def test_a_family_is_what_a_build_depends_on_not_the_shape():
    a, b = gemm_case(4096, m=8), gemm_case(6144, m=512, k=128)
    assert jw.family_key(a) == jw.family_key(b)
    assert jw.family_key(a) != jw.family_key(gemm_case(4096, backend="cublas"))
    assert jw.family_key(a) != jw.family_key(gemm_case(4096, routine="bmm_fp8", dtype="fp8"))
    assert jw.family_key(a) != jw.family_key(replace(a, mode="eager"))


def test_an_autotuned_cudnn_gemm_is_warmed_per_shape_after_the_families(monkeypatch):
    monkeypatch.delenv("CUDA_CACHE_DISABLE", raising=False)
    tuned = RunSettings()
    a, b, a_again = gemm_case(4096, m=8), gemm_case(6144, m=8), gemm_case(4096, m=8, name="other")
    fp8 = gemm_case(4096, m=8, routine="bmm_fp8", dtype="fp8")
    cublas = gemm_case(4096, m=8, backend="cublas")
    assert jw.compiled_per_shape(a, tuned) and jw.compiled_per_shape(fp8, tuned)
    assert not jw.compiled_per_shape(cublas, tuned)
    assert jw.warm_key(a, tuned) != jw.warm_key(b, tuned)
    assert jw.warm_key(a, tuned) == jw.warm_key(a_again, tuned)  # the same shape of another module
    assert jw.warm_key(a, tuned) != jw.warm_key(a, replace(tuned, autotune_tactics=0))  # more plans profiled
    reps = jw.representatives([a, b, a_again, fp8, cublas], tuned)
    assert [c.case_id for c in reps] == [cublas.case_id, a.case_id, b.case_id, fp8.case_id]
    # no profiling, or a CUDA JIT cache that keeps nothing: one case of the family, as for any family
    untuned = replace(tuned, autotune=False)
    assert jw.warm_key(a, untuned) == jw.warm_key(b, untuned) == jw.family_key(a)
    assert [c.case_id for c in jw.representatives([a, b, cublas], untuned)] == [a.case_id, cublas.case_id]
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "1")
    assert jw.warm_key(a, tuned) == jw.family_key(a)


def test_a_shape_is_warmed_autotuned_as_timed_without_the_autotune_file(monkeypatch):
    monkeypatch.delenv("CUDA_CACHE_DISABLE", raising=False)
    settings = RunSettings(num_iters=30, autotune_cache="/home/u/.cache/bmk/autotune/h200.json")
    shape = jw.warm_settings(settings, gemm_case(4096))
    assert (shape.num_iters, shape.dry_run_iters, shape.autotune, shape.autotune_cache) == (1, 1, True, "")
    assert (shape.autotune_tactics, shape.autotune_buckets) == (settings.autotune_tactics, settings.autotune_buckets)
    family = jw.warm_settings(settings, gemm_case(4096, backend="cublas"))
    assert (family.num_iters, family.autotune) == (1, False)
    assert jw.warm_settings(settings) == family


def test_the_smallest_timed_case_of_each_family_stands_for_it():
    big, small = gemm_case(4096, m=512), gemm_case(6144, m=1)
    other = gemm_case(4096, m=64, backend="cublas")
    skipped = gemm_case(4096, m=1, backend="cutlass", skip="needs sm_100")
    twin = gemm_case(4096, m=1, backend="cublas", with_quant=True)
    torch_row = gemm_case(4096, m=1, backend="torch", routine="torch.linear")
    reps = jw.representatives([big, other, small, skipped, twin, torch_row])
    assert [c.case_id for c in reps] == [small.case_id, other.case_id]


def test_the_longest_builds_start_first_attention_then_the_driver_gemms_then_triton():
    # README step 4's cases (Llama-3.1-8B TP=1, M=8, BF16 and FP8, K/V 1024): its 14 families, the
    # 8 attention modules first, so that they are not left waiting behind the short GEMM builds
    plan = planner.plan_model("llama-3.1-8b", 1, 1)
    cases = build_cases(plan, [8], ("bf16", "fp8"), None, (9, 0), attention=AttentionSweep(kv_lens=(1024,)))
    reps = jw.representatives(cases)
    assert [(c.job, c.kind) for c in reps] == [("driver", "attention")] * 8 + [("driver", "gemm")] * 5 + [
        ("triton", "gemm")]
    assert {(c.backend, c.dtype) for c in reps[:8]} == {
        (b, d) for b in ("fa2", "fa2_tc", "cudnn", "trtllm-native") for d in ("bf16", "fp8")}
    # within a rank, the order the families first appear (the plan's)
    assert [c.backend for c in reps[8:10]] == ["cudnn", "cublaslt"]
    moe = moe_case(backend="cutlass")
    assert [jw.build_rank(c) for c in (reps[0], moe, reps[8], reps[-1])] == [0, 1, 2, 3]


def test_workers_are_bounded_by_families_cores_and_the_cap():
    assert jw.worker_count(3, cpus=16) == 3
    assert jw.worker_count(30, cpus=16) == jw.MAX_WORKERS
    assert jw.worker_count(30, cpus=2) == 1 and jw.worker_count(1, cpus=64) == 1


def test_the_record_is_per_set_of_caches_and_survives_a_bad_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "fi"))
    monkeypatch.setenv("CUDA_CACHE_PATH", str(tmp_path / "cuda"))
    before = jw.caches_identity(MACHINE)
    (tmp_path / "fi" / ".cache" / "flashinfer").mkdir(parents=True)
    after = jw.caches_identity(MACHINE)
    assert before != after  # the folder now exists: another set of caches
    (tmp_path / "cuda").mkdir()
    assert jw.caches_identity(MACHINE) != after  # the CUDA driver's JIT cache counts too
    (tmp_path / "cuda").rmdir()
    assert jw.caches_identity({**MACHINE, "gpu": {"name": "NVIDIA B200"}}) != after
    record = jw.WarmRecord(after, str(tmp_path / "rec"))
    assert record.warmed() == set()
    record.add(["a", "b"])
    assert jw.WarmRecord(after, str(tmp_path / "rec")).warmed() == {"a", "b"}
    assert jw.WarmRecord(before, str(tmp_path / "rec")).warmed() == set()
    with open(record.path, "w") as f:
        f.write("{not json")
    assert record.warmed() == set()
    record.add(["c"])
    assert json.load(open(record.path)) == {after: ["c"]}


class _Pool:
    """A pool that answers from a table: case id -> answer (or a lost worker)."""

    made: list[_Pool] = []
    answers: dict[str, dict | None] = {}

    def __init__(self, repo, log, device=None, extra_env=None):
        self.extra_env, self.ran = extra_env, []
        _Pool.made.append(self)

    def run(self, request, timeout):
        self.ran.append(request)
        answer = _Pool.answers.get(request["case_id"], {})
        return WorkerReply(answer=answer) if answer is not None else WorkerReply(lost="worker exited with code 1")

    def stop(self, kill=False):
        return 0

    def kill(self):
        pass


def test_only_families_that_finished_ok_are_recorded(tmp_path):
    good, bad, lost = gemm_case(1, backend="cutlass"), gemm_case(1, backend="cublas"), gemm_case(1, backend="tinygemm")
    _Pool.made, _Pool.answers = [], {bad.case_id: {"exception": "RuntimeError: Ninja build failed."},
                                     lost.case_id: None}
    record = jw.WarmRecord("id", str(tmp_path))
    made = lambda case, settings: {"case_id": case.case_id, "settings": settings.num_iters}  # noqa: E731
    done = jw.warm_up([good, bad, lost], made, RunSettings(num_iters=30, case_timeout=60), record,
                      flashinfer_repo="repo", log_dir=str(tmp_path / "logs"), pool_factory=_Pool)
    assert done is not None and done.families == 3 and set(done.failed) == {bad.case_id, lost.case_id}
    assert record.warmed() == {jw.family_key(good)}
    ran = [r for p in _Pool.made for r in p.ran]
    assert sorted(r["case_id"] for r in ran) == sorted(c.case_id for c in (good, bad, lost))
    assert {r["settings"] for r in ran} == {1}  # one iteration each
    assert all(r["log_path"].startswith(str(tmp_path / "logs")) for r in ran)
    assert all(p.extra_env and int(p.extra_env["MAX_JOBS"]) >= 4 for p in _Pool.made)
    # the next run on the same caches warms only what did not finish
    _Pool.made, _Pool.answers = [], {}
    again = jw.warm_up([good, bad, lost], made, RunSettings(), record, flashinfer_repo="repo",
                       log_dir=str(tmp_path / "logs"), pool_factory=_Pool)
    assert again is not None and again.families == 2
    assert jw.warm_up([good, bad, lost], made, RunSettings(), record, flashinfer_repo="repo",
                      log_dir=str(tmp_path / "logs"), pool_factory=_Pool) is None


def test_a_run_warms_each_family_once_and_the_warm_up_is_no_row(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "fi"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cases = [gemm_case(4096, m=8), gemm_case(4096, m=64), gemm_case(4096, m=8, backend="cublas")]
    settings = RunSettings(num_iters=3, dry_run_iters=1, case_timeout=120)

    def run(workdir):
        phases.next_clock()  # as each CLI run does
        progress = io.StringIO()
        request = run_request(cases, str(tmp_path / workdir), settings, jit_warmup=True)
        rc = runner.run_plan(request, cases, command=["test"], progress=progress, environment=lambda repo: MACHINE)
        return rc, progress.getvalue(), load_results(str(tmp_path / workdir))

    rc, out, results = run("first")
    assert rc == 0, out
    # the two cuDNN shapes are autotuned: each is its own warm-up case, after the cuBLAS family
    assert "JIT warm-up: 1 kernel family and 2 autotuned cuDNN GEMM shapes (compiled per shape)" in out
    assert sorted(by_id(results)) == sorted(c.case_id for c in cases)  # no warm-up row
    assert results["timings"]["phases_s"]["jit warm-up"] > 0
    # each warm-up case's seconds: the three cases (one family, two shapes), none of them a row
    assert sorted(results["timings"]["jit_warm_up_cases"]) == sorted(c.case_id for c in cases)
    assert all(s > 0 for s in results["timings"]["jit_warm_up_cases"].values())
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(ROOT, "references", "results.schema.json")) as f:
        jsonschema.validate(results["timings"], json.load(f)["properties"]["timings"])
    logs = os.listdir(tmp_path / "first" / "cases" / "jit_warmup")
    assert {f"{c.case_id}.log" for c in cases} <= set(logs)
    rc, out, results = run("second")
    assert rc == 0 and "JIT warm-up" not in out and "jit warm-up" not in results["timings"]["phases_s"]
    assert "jit_warm_up_cases" not in results["timings"]


def test_families_timed_ok_without_a_warm_up_are_recorded_too(tmp_path, monkeypatch):
    # a family whose cases came from the result cache had no warm-up; a later run that times them
    # (--no_cache) builds them in its timed pass, and the run after that needs no warm-up for them
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "fi"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cases = [gemm_case(4096, m=8), gemm_case(4096, m=8, backend="cublas")]
    settings = RunSettings(num_iters=3, dry_run_iters=1, case_timeout=120)

    def run(workdir):
        phases.next_clock()
        progress = io.StringIO()
        request = run_request(cases, str(tmp_path / workdir), settings, jit_warmup=True)
        assert runner.run_plan(request, cases, command=["t"], progress=progress,
                               environment=lambda repo: MACHINE) == 0
        return progress.getvalue()

    with monkeypatch.context() as m:
        m.setattr(jw, "warm_up", lambda *a, **k: None)  # as if the families had no warm-up
        run("a")
    assert jw.WarmRecord(jw.caches_identity(MACHINE)).warmed() == {jw.warm_key(c, settings) for c in cases}
    assert "JIT warm-up" not in run("b")


def test_no_jit_warmup_runs_none(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cases = [gemm_case(4096, m=8), gemm_case(4096, m=8, backend="cublas")]
    request = run_request(cases, str(tmp_path / "w"), RunSettings(num_iters=3, dry_run_iters=1), jit_warmup=False)
    progress = io.StringIO()
    assert runner.run_plan(request, cases, command=["t"], progress=progress, environment=lambda repo: MACHINE) == 0
    assert "JIT warm-up" not in progress.getvalue()
    assert not os.path.exists(tmp_path / "w" / "cases" / "jit_warmup")


@pytest.mark.parametrize("flag, expected", [([], True), (["--no_jit_warmup"], False)])
def test_the_flag_sets_the_request(flag, expected, tmp_path):
    import argparse

    from benchmark_model_kernels.run.flags import add_run_arguments, validate_args

    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=1)
    add_run_arguments(parser)
    args = parser.parse_args(["--dry_run", "--workdir", str(tmp_path / "w"), *flag])
    assert validate_args(args).jit_warmup is expected
