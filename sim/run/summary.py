"""Tables after a run: one row per request, and the summary.json contract of DESIGN.md.

The requests table is built as plain columns (`requests_columns`, numpy only: `simulate` writes
them to parquet and summarizes them without importing pandas) and as a DataFrame of the same
columns (`requests_frame`). Everything that reads a requests table here takes either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from sim.engine.request import Status
from sim.errors import InputError
from sim.inputs.engines.apply import effective_settings
from sim.inputs.layout.placement import cluster_placement
from sim.inputs.slo import good_requests
from sim.run.energy_summary import DEFAULT_PUE, DEFAULT_USD_PER_KWH, energy_summary
from sim.run.feature_summary import feature_summary
from sim.run.simulate import SimResult
from sim.run.weighted_percentiles import weighted_percentiles

if TYPE_CHECKING:
    import pandas as pd

RequestsTable = Mapping[str, np.ndarray]  # requests_columns, or a DataFrame of them (column -> values)


def requests_frame(result: SimResult) -> pd.DataFrame:
    """`requests_columns` as a DataFrame."""
    import pandas as pd  # here: `simulate` on the command line never needs it

    return pd.DataFrame(requests_columns(result))


def requests_columns(result: SimResult) -> dict[str, np.ndarray | list]:
    """One row per request, as columns; a request with parallel samples sums their output tokens,
    ends with its last sample and is FINISHED only when every sample is."""
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
    columns = {
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
    }
    if "adapter" in t.trace.extra:  # LoRA (docs/lora.md): the adapter named (-1: none), time skipped for a slot
        waits = getattr(t, "adapter_wait_s", None)
        columns.update(adapter=np.asarray(t.trace.extra["adapter"])[:n],
                       adapter_wait_s=waits[:n] if waits is not None else np.zeros(n))
    attribution = result.recorder.attribution
    if attribution is not None:
        columns.update(attribution.columns(status == Status.FINISHED, finish_s))
    if getattr(result.recorder, "energy", None) is not None:  # joules of the steps each request (its samples) was in
        prefill = np.bincount(owner, weights=t.energy_prefill_j, minlength=n)
        decode = np.bincount(owner, weights=t.energy_decode_j, minlength=n)
        columns.update(energy_prefill_j=prefill, energy_decode_j=decode, energy_j=prefill + decode)
    return columns


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


def _goodput(table: RequestsTable, result: SimResult) -> dict | None:
    slo = result.cfg.slo
    limits = {column: limit for column, limit in (("ttft_s", slo.ttft_s), ("tpot_s", slo.tpot_s),
                                                  ("e2e_s", slo.e2e_s)) if limit is not None}
    if not limits:
        return None
    ok = good_requests(table, limits)
    n_ok = int(ok.sum())
    return {"slo": slo.model_dump(exclude_none=True), "n_met": n_ok, "fraction": n_ok / max(ok.shape[0], 1),
            "request_throughput": n_ok / result.sim_duration_s if result.sim_duration_s else 0.0}


def summarize(result: SimResult, table: RequestsTable | None = None, percentiles=DEFAULT_PERCENTILES,
              electricity: tuple[float, float] = (DEFAULT_USD_PER_KWH, DEFAULT_PUE)) -> dict:
    """The summary.json contract (DESIGN.md, Outputs): seconds in `*_s` fields, and the latency
    statistics again in milliseconds in `*_ms` fields (ttft_ms, tpot_ms, itl_ms, e2e_ms, queue_delay_ms).
    `table`: the run's requests table (`requests_columns` or `requests_frame`), built when not given."""
    table = requests_columns(result) if table is None else table
    status = np.asarray(table["status"])
    finished = status == "FINISHED"
    n_finished = int(np.count_nonzero(finished))

    def of_finished(column: str) -> np.ndarray:
        return np.asarray(table[column])[finished]

    duration = result.sim_duration_s or float("nan")
    prompt_total = float(np.asarray(table["prompt_tokens"])[status != "REJECTED"].sum())
    cfg = result.cfg
    summary = {
        "policy": cfg.policy, "model": cfg.model, "hardware": cfg.hardware, "tp": cfg.tp, "replicas": cfg.replicas,
        "seed": cfg.seed,  # the one the run used: --seed, else the config's, else the workload spec's, else 0
        "n_requests": status.shape[0],
        "n_finished": n_finished,
        "n_rejected": int(np.count_nonzero(status == "REJECTED")),
        "sim_duration_s": result.sim_duration_s,
        "wall_time_s": result.wall_time_s,
        "n_steps": result.recorder.n_steps,
        "request_throughput": n_finished / duration,
        "output_throughput_tok_s": float(of_finished("output_tokens").sum()) / duration,
        "input_throughput_tok_s": float(of_finished("prompt_tokens").sum()) / duration,
        "ttft_s": _stats(of_finished("ttft_s"), percentiles),
        "tpot_s": _stats(of_finished("tpot_s"), percentiles),
        "itl_s": _itl_stats(result, percentiles),
        "e2e_s": _stats(of_finished("e2e_s"), percentiles),
        "queue_delay_s": _stats(of_finished("queue_delay_s"), percentiles),
        "goodput": _goodput(table, result),
        "num_gpu_blocks": result.num_gpu_blocks,
        "num_gpu_blocks_per_replica": result.num_gpu_blocks_per_replica,
        "replica_hardware": cfg.hardware_of_replicas(),
        "block_size": cfg.block_size,
        "kv_utilization_mean": result.recorder.kv_utilization_mean,
        "kv_fragmentation": result.recorder.kv_fragmentation,
        "preemptions": result.recorder.preemptions,
        "prefix_hit_rate": float(np.asarray(table["cached_tokens"]).sum()) / prompt_total if prompt_total else 0.0,
        "evicted_blocks": result.evicted_blocks,
        "max_model_len": result.max_model_len,
        "engine": effective_settings(cfg),
        "placement": cluster_placement(cfg),  # hook: nodes and GPUs of each replica (sim/inputs/layout/placement.py)
        **feature_summary(result, table),  # hook: sim/run/feature_summary.py
    }
    energy = energy_summary(result, table, *electricity)
    if energy is not None:  # hook: sim/run/energy_summary.py (no key at all when a profile has no power section)
        summary["energy"] = energy
    summary.update({key[:-2] + "_ms": in_ms(summary[key]) for key in LATENCY_KEYS})
    return summary
