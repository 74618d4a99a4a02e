"""summary.json fields of the beyond-one-engine features: latency attribution, speculative
decoding, the host-memory prefix tier and disaggregation. Merged into `sim.run.summary.summarize`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from sim.run.attribution_summary import attribution_summary
from sim.run.lora_summary import lora_summary

if TYPE_CHECKING:
    from sim.run.simulate import SimResult


def _spec_summary(result: SimResult) -> dict | None:
    speculating = [facts for facts in result.facts if facts.spec_k]
    if not speculating:
        return None
    from sim.engine.spec_decode import expected_tokens_per_step

    first = speculating[0]
    proposed = sum(facts.spec_proposed for facts in speculating)
    accepted = sum(facts.spec_accepted for facts in speculating)
    n_seq_steps = proposed / first.spec_k
    return {
        "spec_tokens": first.spec_k,
        "acceptance": list(first.spec_acceptance),
        "proposed": proposed,
        "accepted": accepted,
        "acceptance_rate": accepted / proposed if proposed else None,
        # drawn, before capping at each request's remaining output
        "tokens_per_step_drawn": 1.0 + accepted / n_seq_steps if n_seq_steps else None,
        "tokens_per_step_expected": expected_tokens_per_step(list(first.spec_acceptance)),
    }


def _tier_hit_rates(result: SimResult, table: Mapping[str, np.ndarray]) -> dict:
    prompt_total = float(np.asarray(table["prompt_tokens"])[np.asarray(table["status"]) != "REJECTED"].sum())
    host = float(result.table.host_cached_tokens[: result.table.n_requests].sum())
    gpu = float(np.asarray(table["cached_tokens"]).sum()) - host
    return {"prefix_hit_rate_gpu": gpu / prompt_total if prompt_total else 0.0,
            "prefix_hit_rate_host": host / prompt_total if prompt_total else 0.0}


def _transfer_stats(table: Mapping[str, np.ndarray]) -> dict | None:
    values = np.asarray(table["kv_transfer_s"])[np.asarray(table["status"]) == "FINISHED"]
    moved = values[values > 0]
    if moved.size == 0:
        return None
    p50, p90, p99 = np.percentile(moved, [50, 90, 99])
    return {"n_transferred": int(moved.size), "mean": float(moved.mean()), "p50": float(p50), "p90": float(p90),
            "p99": float(p99), "max": float(moved.max())}


def feature_summary(result: SimResult, table: Mapping[str, np.ndarray]) -> dict:
    """These fields for a run and its requests table (`sim.run.summary.requests_columns` or a DataFrame)."""
    out = {
        "latency_attribution": attribution_summary(table),
        "spec_decoding": _spec_summary(result),
        **_tier_hit_rates(result, table),
        "kv_transfer_s": _transfer_stats(table),
    }
    if result.cfg.enable_lora:
        out["lora"] = lora_summary(result, table)
    disagg = getattr(result, "disagg", None)
    if disagg is not None:
        out["disaggregation"] = disagg.summary()
        # the whole cluster (P prefill then D decode replicas), not the one-replica base config
        out["replicas"] = len(result.replicas)
        out["replica_hardware"] = [replica.sched.cfg.hardware for replica in result.replicas]
    return out
