"""What a result file needs to explain itself: tool version, the full effective config, the
workload (where from, a content hash, how many requests) and the seed."""

from __future__ import annotations

import hashlib

import numpy as np

from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import ClosedLoop, Trace


def trace_sha256(trace: Trace) -> str:
    """SHA-256 over the replayed content (arrival times, prompt and output lengths, samples, prefix
    hash ids), so the same requests give the same hash whatever file or format they came from. A trace
    whose prefix ids were dropped for a run that does not read them keeps the hash it had with them."""
    if trace.content_sha256 is not None:
        return trace.content_sha256
    digest = hashlib.sha256()
    for array in (trace.arrival_s, trace.prompt_tokens, trace.output_tokens, trace.n_samples,
                  trace.hash_ids_flat, trace.hash_offsets):
        if array is not None:
            digest.update(memoryview(np.ascontiguousarray(array)).cast("B"))  # the bytes, without a copy
        digest.update(b"|")
    return digest.hexdigest()


def workload_info(workload: Trace | ClosedLoop) -> dict:
    """{"path", "sha256", "n_requests"} of what was replayed (a closed loop: its request pool)."""
    trace = workload.pool if isinstance(workload, ClosedLoop) else workload
    return {"path": trace.source, "sha256": trace_sha256(trace), "n_requests": len(trace),
            "closed_loop": isinstance(workload, ClosedLoop)}


def provenance(cfg: EngineConfig, workload: Trace | ClosedLoop) -> dict:
    """The `infersim_version`, `config` (every effective field), `trace` and `seed` entries of
    summary.json / plan.json."""
    from sim import __version__

    return {"infersim_version": __version__, "config": cfg.model_dump(mode="json"),
            "trace": workload_info(workload), "seed": cfg.seed}
