"""Tables after a run: one row per request, and the summary.json contract of DESIGN.md."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.engines.apply import effective_settings
from sim.errors import InputError
from sim.feature_summary import feature_summary
from sim.metrics import weighted_percentiles
from sim.request import Status
from sim.simulate import SimResult


def requests_frame(result: SimResult) -> pd.DataFrame:
    """One row per request; a request with parallel samples sums their output tokens, ends with
    its last sample and is FINISHED only when every sample is."""
    t = result.table
    n = t.n_requests
    owner = t.sample_of
    generated = t.n_tokens - t.prompt_tokens
    output_tokens = np.bincount(owner, weights=generated, minlength=n).astype(np.int64)
    n_samples = np.bincount(owner, minlength=n)
    finished_samples = np.bincount(owner, weights=t.status == Status.FINISHED, minlength=n)
    finish_s = t.finish_s[:n].copy()
    np.fmax.at(finish_s, owner, t.finish_s)
    status = t.status[:n].copy()
    partial = (status == Status.FINISHED) & (finished_samples < n_samples)
    status[partial] = Status.RUNNING
    own = generated[:n]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(own > 1, (t.finish_s[:n] - t.first_token_s[:n]) / (own - 1), np.nan)
    status_names = np.array([s.name for s in Status])
    frame = pd.DataFrame({
        "request_id": np.arange(n),
        "replica": t.replica[:n],
        "status": status_names[status],
        "arrival_s": t.arrival_s[:n],
        "scheduled_s": t.scheduled_s[:n],
        "first_token_s": t.first_token_s[:n],
        "finish_s": finish_s,
        "queue_delay_s": t.scheduled_s[:n] - t.arrival_s[:n],
        "ttft_s": t.first_token_s[:n] - t.arrival_s[:n],
        "e2e_s": finish_s - t.arrival_s[:n],
        "tpot_s": tpot,
        "prompt_tokens": t.prompt_tokens[:n],
        "output_tokens": output_tokens,
        "n_samples": n_samples,
        "cached_tokens": t.cached_tokens[:n],
        "preemptions": np.bincount(owner, weights=t.preemptions, minlength=n).astype(np.int64),
        "preempted_s": np.bincount(owner, weights=t.preempted_s, minlength=n),
        "kv_transfer_s": t.kv_transfer_s[:n],
        "reject_reason": [t.reject_reason.get(i) for i in range(n)],
    })
    attribution = result.recorder.attribution
    if attribution is not None:
        for name, values in attribution.columns(status == Status.FINISHED, finish_s).items():
            frame[name] = values
    return frame


DEFAULT_PERCENTILES = (50, 90, 99)
LATENCY_KEYS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "queue_delay_s")  # each also written as *_ms


def parse_percentiles(text: str | None, where: str = "--percentiles") -> tuple[float, ...]:
    """'50,90,95,99' -> (50, 90, 95, 99) (sorted, duplicates dropped); each in (0, 100)."""
    if text is None:
        return DEFAULT_PERCENTILES
    values = []
    for item in (part.strip() for part in text.split(",")):
        try:
            value = float(item)
        except ValueError:
            value = float("nan")
        if not 0 < value < 100:
            raise InputError(where, item or None, "comma-separated percentiles, each > 0 and < 100, e.g. 50,90,95,99")
        values.append(int(value) if value.is_integer() else value)
    return tuple(sorted(set(values)))


def _key(q: float) -> str:
    return f"p{q:g}".replace(".", "_")


def _stats(values: np.ndarray, percentiles=DEFAULT_PERCENTILES) -> dict:
    values = values[~np.isnan(values)]
    keys = ["mean", *(_key(q) for q in percentiles), "max"]
    if values.size == 0:
        return dict.fromkeys(keys)
    picked = np.percentile(values, list(percentiles))
    return {"mean": float(values.mean()), **{_key(q): float(v) for q, v in zip(percentiles, picked, strict=True)},
            "max": float(values.max())}


def _itl_stats(result: SimResult, percentiles=DEFAULT_PERCENTILES) -> dict:
    values, weights = result.recorder.gap_values.array(), result.recorder.gap_weights.array()
    if values.size == 0:
        return _stats(np.empty(0), percentiles)
    picked = weighted_percentiles(values, weights, [q / 100 for q in percentiles])
    mean = float((values * weights).sum() / weights.sum())
    return {"mean": mean, **{_key(q): v for q, v in zip(percentiles, picked, strict=True)}, "max": float(values.max())}


def in_ms(stats: dict) -> dict:
    """The same statistics in milliseconds (what `vllm bench serve` users read)."""
    return {k: None if v is None else v * 1e3 for k, v in stats.items()}


def _goodput(frame: pd.DataFrame, result: SimResult) -> dict | None:
    slo = result.cfg.slo
    if slo.ttft_s is None and slo.tpot_s is None and slo.e2e_s is None:
        return None
    ok = frame["status"] == "FINISHED"
    for column, limit in (("ttft_s", slo.ttft_s), ("tpot_s", slo.tpot_s), ("e2e_s", slo.e2e_s)):
        if limit is not None:
            ok &= frame[column].fillna(0.0) <= limit
    n_ok = int(ok.sum())
    return {"slo": slo.model_dump(exclude_none=True), "n_met": n_ok, "fraction": n_ok / max(len(frame), 1),
            "request_throughput": n_ok / result.sim_duration_s if result.sim_duration_s else 0.0}


def summarize(result: SimResult, frame: pd.DataFrame | None = None, percentiles=DEFAULT_PERCENTILES) -> dict:
    """The summary.json contract (DESIGN.md, Outputs): seconds in `*_s` fields, and the latency
    statistics again in milliseconds in `*_ms` fields (ttft_ms, tpot_ms, itl_ms, e2e_ms, queue_delay_ms)."""
    frame = requests_frame(result) if frame is None else frame
    finished = frame[frame["status"] == "FINISHED"]
    duration = result.sim_duration_s or float("nan")
    prompt_total = float(frame.loc[frame["status"] != "REJECTED", "prompt_tokens"].sum())
    cfg = result.cfg
    summary = {
        "policy": cfg.policy, "model": cfg.model, "hardware": cfg.hardware, "tp": cfg.tp, "replicas": cfg.replicas,
        "seed": cfg.seed,  # the one the run used: --seed, else the config's, else the workload spec's, else 0
        "n_requests": len(frame),
        "n_finished": len(finished),
        "n_rejected": int((frame["status"] == "REJECTED").sum()),
        "sim_duration_s": result.sim_duration_s,
        "wall_time_s": result.wall_time_s,
        "n_steps": result.recorder.n_steps,
        "request_throughput": len(finished) / duration,
        "output_throughput_tok_s": float(finished["output_tokens"].sum()) / duration,
        "input_throughput_tok_s": float(finished["prompt_tokens"].sum()) / duration,
        "ttft_s": _stats(finished["ttft_s"].to_numpy(), percentiles),
        "tpot_s": _stats(finished["tpot_s"].to_numpy(), percentiles),
        "itl_s": _itl_stats(result, percentiles),
        "e2e_s": _stats(finished["e2e_s"].to_numpy(), percentiles),
        "queue_delay_s": _stats(finished["queue_delay_s"].to_numpy(), percentiles),
        "goodput": _goodput(frame, result),
        "num_gpu_blocks": result.num_gpu_blocks,
        "num_gpu_blocks_per_replica": result.num_gpu_blocks_per_replica,
        "replica_hardware": cfg.hardware_of_replicas(),
        "block_size": cfg.block_size,
        "kv_utilization_mean": result.recorder.kv_utilization_mean,
        "kv_fragmentation": result.recorder.kv_fragmentation,
        "preemptions": result.recorder.preemptions,
        "prefix_hit_rate": float(frame["cached_tokens"].sum()) / prompt_total if prompt_total else 0.0,
        "evicted_blocks": result.evicted_blocks,
        "max_model_len": result.max_model_len,
        "engine": effective_settings(cfg),
        **feature_summary(result, frame),  # hook: sim/feature_summary.py
    }
    summary.update({key[:-2] + "_ms": in_ms(summary[key]) for key in LATENCY_KEYS})
    return summary
