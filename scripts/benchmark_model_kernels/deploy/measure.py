"""Collectives timed on this machine at the exact sizes a deployment needs.

Worker processes (torch.multiprocessing spawn, one per rank, rendezvous on a free 127.0.0.1 port)
join one torch.distributed group, backend "nccl" on GPUs (one GPU each, BF16 buffers) or "gloo" on
CPU (float32 buffers: the same code, for tests and for machines without two GPUs). Each op runs at
each size in nccl-tests' meaning of size (`Collective.bytes_per_rank`): all_reduce a buffer of that
many bytes, all_gather into an output of that many, reduce_scatter from an input of that many,
all_to_all a send buffer of that many. A time is the mean over `iters` calls after `warmup` calls,
the slowest rank's (the step waits for it). Out: op -> sorted [(bytes, us)], what
`comm_times.CommModel` takes with the group size.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import UsageError
from .collectives import OPS, Collective

BACKENDS = ("nccl", "gloo")


@dataclass(frozen=True)
class MeasureSpec:
    """What the workers run (passed to each spawned process)."""

    ranks: int
    backend: str
    requests: dict[str, list[int]]
    """op -> sizes in bytes."""
    port: int
    out_path: str
    warmup: int = 5
    iters: int = 20
    timeout_s: float = 300.0


def sizes_needed(collectives: Iterable[Collective]) -> dict[int, dict[str, list[int]]]:
    """Group size -> op -> the message sizes the collectives use (groups of 2 or more ranks)."""
    out: dict[int, dict[str, set[int]]] = {}
    for c in collectives:
        if c.group >= 2:
            out.setdefault(c.group, {}).setdefault(c.op, set()).add(c.bytes_per_rank)
    return {g: {op: sorted(s) for op, s in ops.items()} for g, ops in sorted(out.items())}


def gpus_here() -> int:
    """CUDA GPUs torch sees (0 without CUDA)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def measure_collectives(requests: Mapping[str, Sequence[int]], ranks: int, *, backend: str | None = None,
                        warmup: int = 5, iters: int = 20) -> dict[str, list[tuple[int, float]]]:
    """op -> sorted [(bytes, us)] for each requested op and size, over `ranks` worker processes.
    `backend` None: "nccl" when this machine has `ranks` GPUs."""
    import torch.multiprocessing as mp

    if backend is None:
        if gpus_here() < ranks:
            raise UsageError("--measure_comm", ranks, f"needs {ranks} GPUs, this machine has {gpus_here()}; the "
                             "bundled table or --nccl_tests output gives the times instead")
        backend = "nccl"
    if backend not in BACKENDS:
        raise UsageError("backend", backend, f"must be one of {', '.join(BACKENDS)}")
    if ranks < 2:
        raise UsageError("ranks", ranks, "a collective needs 2 or more ranks")
    for op in requests:
        if op not in OPS:
            raise UsageError("op", op, f"must be one of {', '.join(OPS)}")
    with tempfile.TemporaryDirectory(prefix="bmk-comm-") as folder:
        spec = MeasureSpec(ranks=ranks, backend=backend, requests={op: sorted(set(s)) for op, s in requests.items()},
                           port=_free_port(), out_path=os.path.join(folder, "times.json"), warmup=warmup, iters=iters)
        mp.spawn(_worker, args=(asdict(spec),), nprocs=ranks, join=True)
        with open(spec.out_path, encoding="utf-8") as f:
            raw = json.load(f)
    return {op: [(int(s), float(us)) for s, us in pts] for op, pts in raw.items()}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, raw_spec: dict[str, Any]) -> None:
    """One rank: join the group, time every op at every size, rank 0 writes the slowest rank's."""
    import datetime

    import torch
    import torch.distributed as dist

    spec = MeasureSpec(**raw_spec)
    gpu = spec.backend == "nccl"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group(spec.backend, init_method=f"tcp://127.0.0.1:{spec.port}", rank=rank,
                            world_size=spec.ranks, timeout=datetime.timedelta(seconds=spec.timeout_s))
    try:
        device = torch.device("cuda", rank) if gpu else torch.device("cpu")
        dtype = torch.bfloat16 if gpu else torch.float32
        results: dict[str, list[tuple[int, float]]] = {}
        for op, sizes in spec.requests.items():
            results[op] = []
            for nbytes in sizes:
                run, actual = _op_call(op, nbytes, spec.ranks, device, dtype)
                us = _time_calls(run, spec, gpu)
                slowest = torch.tensor([us], dtype=torch.float64, device=device)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                results[op].append((actual, float(slowest.item())))
        if rank == 0:
            with open(spec.out_path, "w", encoding="utf-8") as f:
                json.dump(results, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _op_call(op: str, nbytes: int, ranks: int, device: Any, dtype: Any) -> tuple[Any, int]:
    """A no-argument call running `op` once at `nbytes` (nccl-tests' size), and the size it moves
    (rounded up to whole elements, a multiple of the ranks where the op splits the buffer)."""
    import torch
    import torch.distributed as dist

    elem = torch.empty((), dtype=dtype).element_size()
    unit = elem * (1 if op == "all_reduce" else ranks)
    count = max(1, -(-nbytes // unit)) * (unit // elem)  # elements of the nccl-tests-sized buffer
    full = torch.ones(count, dtype=dtype, device=device)
    if op == "all_reduce":
        return (lambda: dist.all_reduce(full)), count * elem
    part = torch.ones(count // ranks, dtype=dtype, device=device)
    if op == "all_gather":
        return (lambda: dist.all_gather_into_tensor(full, part)), count * elem
    if op == "reduce_scatter":
        return (lambda: dist.reduce_scatter_tensor(part, full)), count * elem
    out = torch.empty_like(full)
    return (lambda: dist.all_to_all_single(out, full)), count * elem


def _time_calls(run: Any, spec: MeasureSpec, gpu: bool) -> float:
    """Mean microseconds of one call: CUDA events around `iters` calls on a GPU, the wall clock on CPU."""
    import torch
    import torch.distributed as dist

    for _ in range(spec.warmup):
        run()
    dist.barrier()
    if gpu:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(spec.iters):
            run()
        end.record()
        torch.cuda.synchronize()
        return float(start.elapsed_time(end)) * 1e3 / spec.iters
    begin = time.perf_counter()
    for _ in range(spec.iters):
        run()
    return (time.perf_counter() - begin) * 1e6 / spec.iters


__all__ = ["BACKENDS", "MeasureSpec", "gpus_here", "measure_collectives", "sizes_needed"]
