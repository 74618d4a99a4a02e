"""`bench_serve.json`: a run's result shaped like `vllm bench serve --save-result`'s JSON (with
`simulate --save-detailed`, its --save-detailed one), so the dashboards and scripts that read vLLM's
benchmark results, and `pd.read_json` (one row per request), read a simulation too.

Field names, units and per-request conventions follow vLLM's serving benchmark
(vllm/benchmarks/serve.py, read at commit 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): `duration`
(s, first arrival to last finish), `completed`, `failed`, `total_input_tokens`,
`total_output_tokens`, `request_throughput`, `request_goodput` (requests meeting every SLO per
second; null without SLOs), `output_throughput` and `total_token_throughput` (tok/s), and for each
of ttft, tpot, itl and e2el `mean_*_ms`, `median_*_ms`, `std_*_ms` and `p<q>_*_ms` (q: 90, 95, 99,
as its `--metric-percentiles 90,95,99`). Per request, in request_id order (requests.parquet's):
`input_lens`, `output_lens` (0 for a request that did not finish), `ttfts`, `latencies` (E2E) and
`start_times` (arrival) in s, and `errors` ("" for success, else the reject reason); a request that
did not finish has ttft 0.0, latency 0.0 and no gaps, as vLLM writes a failed one.

`itls` (a list of s per request) only with `simulate --save-detailed`, as vLLM writes it only with
its --save-detailed: its size grows with the run's output tokens (~115 MB for splitwise_conv's
19,366 requests, ~1 MB without). They are the request's own simulated gaps, recorded as the run
steps (sim/engine/request_gaps.py) from the very numbers behind `mean_itl_ms`, `p99_itl_ms` and the
other itl fields: pooled, the lists hold exactly the gaps those statistics are over (in bounded
memory: past 4 M stored gaps, a request's gaps within 0.2 % of each other are merged into their
mean), and a request's list sums to latency - ttft (to rounding), as vLLM's does. No texts are
simulated: `generated_texts` is absent. The infersim extras are flat `infersim_*` keys (a nested
object would break `pd.read_json`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sim.run.weighted_percentiles import weighted_percentiles

PERCENTILES = (90, 95, 99)


ENERGY_EXTRAS = ("mean_power_w_per_gpu", "p99_power_w_per_gpu", "energy_per_request_j", "j_per_output_token",
                 "j_per_total_token", "kwh_per_day", "electricity_usd_per_day")

def vllm_bench_result(result, table: Mapping[str, np.ndarray], summary: dict, detailed: bool = False) -> dict:
    """The bench_serve.json content of a finished run (`result`: the SimResult; `table`: its
    requests columns, sim.run.summary.requests_columns; `summary`: its summary.json); `detailed`:
    with the per-request `itls` (vLLM's --save-detailed)."""
    status = np.asarray(table["status"])
    done = status == "FINISHED"
    duration = result.sim_duration_s or 0.0
    inputs = np.asarray(table["prompt_tokens"])[done]
    outputs = np.asarray(table["output_tokens"])[done]
    out = {
        "backend": "infersim", "model_id": summary.get("model"), "num_prompts": int(status.shape[0]),
        "duration": duration, "completed": int(done.sum()), "failed": int((~done).sum()),
        "total_input_tokens": int(inputs.sum()), "total_output_tokens": int(outputs.sum()),
        "request_throughput": _per_s(done.sum(), duration),
        "request_goodput": None if not summary.get("goodput") else summary["goodput"]["request_throughput"],
        "output_throughput": _per_s(outputs.sum(), duration),
        "total_token_throughput": _per_s(inputs.sum() + outputs.sum(), duration),
    }
    for name, column in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2el", "e2e_s")):
        out.update(_ms_stats(name, np.asarray(table[column], dtype=float)[done]))
    out.update(_itl_stats(result))
    out.update(_per_request(table, done, status, _itls(result, done) if detailed else None))
    out.update({"infersim_simulated": True, "infersim_summary": "summary.json",
                "infersim_version": summary.get("infersim_version")})
    energy = summary.get("energy")  # flat extras too (summary.json's `energy`, docs/power.md)
    if energy:
        out.update({f"infersim_{key}": energy[key] for key in ENERGY_EXTRAS})
    return out


def _itls(result, done: np.ndarray) -> list[list[float]]:
    """Each request's own simulated gaps (s); [] for one that did not finish, as vLLM writes a failed one."""
    gaps = result.recorder.request_gaps
    if gaps is None:
        raise ValueError("itls need the run's per-request gaps: simulate(..., request_gaps=True)")
    lists = gaps.lists(result.table.sample_of, done.shape[0])
    return [gap_list if ok else [] for gap_list, ok in zip(lists, done.tolist(), strict=True)]


def _per_request(table: Mapping[str, np.ndarray], done: np.ndarray, status: np.ndarray,
                 itls: list[list[float]] | None) -> dict:
    """vLLM's per-request lists (module docstring), one entry per request in table order; `itls`
    only when given (--save-detailed)."""
    ttft = np.where(done, np.asarray(table["ttft_s"], dtype=float), 0.0)
    e2e = np.where(done, np.asarray(table["e2e_s"], dtype=float), 0.0)
    outputs = np.where(done, np.asarray(table["output_tokens"]), 0)
    lists = {"input_lens": np.asarray(table["prompt_tokens"]).tolist(), "output_lens": outputs.tolist(),
             "ttfts": ttft.tolist()}
    if itls is not None:
        lists["itls"] = itls
    return {**lists, "latencies": e2e.tolist(), "start_times": np.asarray(table["arrival_s"], dtype=float).tolist(),
            "errors": ["" if ok else str(reason or status[i]) for i, (ok, reason) in
                       enumerate(zip(done, table["reject_reason"], strict=True))]}


def _per_s(amount, duration: float) -> float:
    return float(amount) / duration if duration else 0.0


def _ms_stats(name: str, values_s: np.ndarray) -> dict:
    values = values_s[~np.isnan(values_s)] * 1e3
    if values.size == 0:
        return {f"{k}_{name}_ms": None for k in ("mean", "median", "std", *(f"p{q}" for q in PERCENTILES))}
    picked = np.percentile(values, PERCENTILES)
    return {f"mean_{name}_ms": float(values.mean()), f"median_{name}_ms": float(np.median(values)),
            f"std_{name}_ms": float(values.std()), **{f"p{q}_{name}_ms": float(v) for q, v in zip(PERCENTILES, picked,
                                                                                                 strict=True)}}


def _itl_stats(result) -> dict:
    """ITL over every inter-token gap (the recorder keeps gaps with weights: runs of equal gaps)."""
    values, weights = result.recorder.gap_values.array() * 1e3, result.recorder.gap_weights.array()
    if values.size == 0:
        return _ms_stats("itl", np.empty(0))
    mean = float((values * weights).sum() / weights.sum())
    std = float(np.sqrt((weights * (values - mean) ** 2).sum() / weights.sum()))
    quantiles = weighted_percentiles(values, weights, [0.5, *(q / 100 for q in PERCENTILES)])
    return {"mean_itl_ms": mean, "median_itl_ms": float(quantiles[0]), "std_itl_ms": std,
            **{f"p{q}_itl_ms": float(v) for q, v in zip(PERCENTILES, quantiles[1:], strict=True)}}
