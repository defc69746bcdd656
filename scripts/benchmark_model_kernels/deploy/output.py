"""deployment.json: the deployment view as data (its JSON Schema: references/deployment.schema.json).

In: a `Deployment` (the model, the GPUs, the workload, every layout and every cell of view.py).
Out: a JSON-ready dict, every number a `{"value", "label", "source"}` object or `{"value": null,
"reason"}`, and the answers per (B, context). Written atomically; nothing here computes a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..core.files import write_text_atomic
from ..core.version import __version__
from .layouts import Cluster, LayoutPlan
from .view import BASIS_WORDS, CommLine, Quantity, StepCell, Workload, answers

DEPLOYMENT_JSON = "deployment.json"
DEPLOYMENT_SCHEMA_VERSION = 1

#: What one number of the view is and is not, said once in every deployment.json and report.md.
SCOPE = ("one decode step of the busiest rank: B sequences each add one token over their context; not "
         "serving throughput (prefill, scheduling, queueing and sampling are not in it: measure that with "
         "`vllm bench serve`)")
MEASURED_TEXT = ("measured: the per-rank GEMM, MoE and attention kernel times, each layout's own cases timed "
                 "on this machine's GPU (its results.json; rows copied from the result cache name the run "
                 "that timed them)")
MODELLED_TEXT = ("modelled: the step time (the sum of isolated kernels and collectives, no overlap, no "
                 "launch gaps, norms or activations outside fused kernels), the MoE time of the busiest "
                 "expert-parallel rank (the measured time x its token-expert pairs over the mean), "
                 "communication unless measured on this machine (each collective names its source), "
                 "and the tokens/s derived from the step")
NOT_MODELLED = "pipeline parallelism and deployments over more than one node are out of scope"


@dataclass(frozen=True)
class Deployment:
    """Everything deployment.json and report.md say."""

    model: str
    cluster: Cluster
    work: Workload
    layouts: tuple[LayoutPlan, ...]
    cells: tuple[StepCell, ...]
    command: tuple[str, ...] = ()
    workdirs: dict[str, str] = field(default_factory=dict)
    """Layout name -> the sub-workdir its cases were timed into (relative to the deployment's)."""
    all2all_backend: str = "allgather_reducescatter"
    comm_sources: tuple[str, ...] = ()
    """What the communication model reads, in its order of preference (CommModel's own words)."""


def quantity(q: Quantity) -> dict[str, Any]:
    if q.value is None:
        return {"value": None, "reason": q.reason or "no number"}
    return {"value": q.value, "label": q.label, "source": q.source}


def _comm_line(c: CommLine) -> dict[str, Any]:
    return {"name": c.name, "op": c.op, "group": c.group, "bytes_per_rank": c.bytes_per_rank,
            "per_step": c.per_step, "us_each": quantity(c.time), "us_per_step": quantity(c.total),
            "issued_by": c.cited, "note": c.note}


def _cell(c: StepCell) -> dict[str, Any]:
    return {
        "layout": c.layout, "recipe": c.recipe, "recipe_key": c.recipe_key, "batch": c.batch,
        "context": c.context, "m": c.m, "moe_tokens": c.moe_tokens, "fits": c.fits,
        "fit_reason": c.fit_reason,
        "gemm_us": quantity(c.gemm), "moe_uniform_us": quantity(c.moe_uniform),
        "moe_imbalance": quantity(c.imbalance), "moe_us": quantity(c.moe),
        "attention_us": quantity(c.attention), "communication": [_comm_line(x) for x in c.communication],
        "communication_us": quantity(c.comm), "step_us": quantity(c.step),
        "tokens_per_s": quantity(c.tokens_per_s), "tokens_per_s_per_gpu": quantity(c.per_gpu),
        "tokens_per_s_per_sequence": quantity(c.per_sequence), "communication_share": quantity(c.comm_share),
        "notes": list(c.notes),
    }


def _layout(lp: LayoutPlan, workdir: str | None) -> dict[str, Any]:
    lay = lp.layout
    return {
        "name": lp.name, "label": lp.label, "tp": lay.tp, "dp": lay.dp, "ep": lay.ep,
        "expert_parallel": lay.use_ep, "status": "planned" if lp.runnable else "refused",
        "refusal_kind": lp.refusal_kind, "reason": lp.refusal, "workdir": workdir,
        "weights_bytes": {r: e.weight_bytes for r, e in lp.estimates.items()},
        "kv_budget_bytes": {r: e.kv_budget_bytes for r, e in lp.estimates.items()},
    }


def _pick(c: StepCell | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"layout": c.layout, "label": c.label, "recipe": c.recipe, "step_us": c.step.value,
            "tokens_per_s_per_gpu": c.per_gpu.value, "tokens_per_s_per_sequence": c.per_sequence.value}


def document(dep: Deployment) -> dict[str, Any]:
    """deployment.json's content."""
    kind = dep.cluster.kind
    work = dep.work
    return {
        "schema_version": DEPLOYMENT_SCHEMA_VERSION,
        "tool": {"name": "benchmark-model-kernels", "version": __version__},
        "command": list(dep.command),
        "model": dep.model,
        "gpus": {"kind": kind.name, "count": dep.cluster.count, "memory_bytes": kind.memory_bytes,
                 "memory_source": kind.memory_source, "compute_capability": kind.cc_text,
                 "comm_system": kind.comm_system},
        "workload": {"batches": list(work.batches), "contexts": list(work.contexts), "recipes": list(work.recipes),
                     "kv_dtype": work.kv_dtype, "basis": BASIS_WORDS.get(work.basis, work.basis),
                     "routing": work.routing_text, "all2all_backend": dep.all2all_backend},
        "notes": {"scope": SCOPE, "measured": MEASURED_TEXT, "modelled": MODELLED_TEXT,
                  "not_modelled": NOT_MODELLED, "communication_sources": list(dep.comm_sources)},
        "layouts": [_layout(lp, dep.workdirs.get(lp.name)) for lp in dep.layouts],
        "cells": [_cell(c) for c in dep.cells],
        "answers": [{"batch": a.batch, "context": a.context, "best": _pick(a.best), "runner_up": _pick(a.runner_up),
                     "reason": a.reason} for a in answers(dep.cells, work)],
    }


def write_deployment(dep: Deployment, folder: str) -> str:
    """Write `folder`/deployment.json atomically; its path."""
    import json

    path = os.path.join(folder, DEPLOYMENT_JSON)
    write_text_atomic(path, json.dumps(document(dep), indent=1) + "\n")
    return path


__all__ = ["DEPLOYMENT_JSON", "DEPLOYMENT_SCHEMA_VERSION", "SCOPE", "MEASURED_TEXT", "MODELLED_TEXT",
           "NOT_MODELLED", "Deployment", "quantity", "document", "write_deployment"]
