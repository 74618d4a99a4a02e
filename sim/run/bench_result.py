"""`bench_serve.json`: a run's result shaped like `vllm bench serve --save-result`'s JSON, so the
dashboards and scripts that read vLLM's benchmark results read a simulation too.

Field names and meanings follow vLLM's serving benchmark (vllm/benchmarks/serve.py): `duration`
(s, first arrival to last finish), `completed`, `total_input_tokens`, `total_output_tokens`,
`request_throughput`, `request_goodput` (requests meeting every SLO per second; null without SLOs),
`output_throughput` and `total_token_throughput` (tok/s), and for each of ttft, tpot, itl and e2el
`mean_*_ms`, `median_*_ms`, `std_*_ms` and `p<q>_*_ms` (q: 90, 95, 99, as its
`--metric-percentiles 90,95,99`); per-request lists `input_lens`, `output_lens` and `ttfts` (s), and
`errors` (the reject reason of each request that did not finish, else ""). The simulation has no
texts: `generated_texts` is absent. `infersim` names the source of the numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sim.run.weighted_percentiles import weighted_percentiles

PERCENTILES = (90, 95, 99)


def vllm_bench_result(result, table: Mapping[str, np.ndarray], summary: dict) -> dict:
    """The bench_serve.json content of a finished run (`result`: the SimResult; `table`: its
    requests columns, sim.run.summary.requests_columns; `summary`: its summary.json)."""
    status = np.asarray(table["status"])
    done = status == "FINISHED"
    duration = result.sim_duration_s or 0.0
    inputs = np.asarray(table["prompt_tokens"])[done]
    outputs = np.asarray(table["output_tokens"])[done]
    out = {
        "backend": "infersim", "model_id": summary.get("model"), "num_prompts": int(status.shape[0]),
        "duration": duration, "completed": int(done.sum()),
        "total_input_tokens": int(inputs.sum()), "total_output_tokens": int(outputs.sum()),
        "request_throughput": _per_s(done.sum(), duration),
        "request_goodput": None if not summary.get("goodput") else summary["goodput"]["request_throughput"],
        "output_throughput": _per_s(outputs.sum(), duration),
        "total_token_throughput": _per_s(inputs.sum() + outputs.sum(), duration),
    }
    for name, column in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2el", "e2e_s")):
        out.update(_ms_stats(name, np.asarray(table[column], dtype=float)[done]))
    out.update(_itl_stats(result))
    out.update({"input_lens": np.asarray(table["prompt_tokens"]).tolist(),
                "output_lens": np.where(done, np.asarray(table["output_tokens"]), 0).tolist(),
                "ttfts": [float(v) if ok else 0.0 for v, ok in zip(np.asarray(table["ttft_s"], dtype=float), done,
                                                                  strict=True)],
                "errors": ["" if ok else str(reason or status[i]) for i, (ok, reason) in
                           enumerate(zip(done, table["reject_reason"], strict=True))],
                "infersim": {"simulated": True, "summary": "summary.json", "version": summary.get("infersim_version")}})
    return out


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
