"""Replay a measured run through the simulator and compare it request by request.

Request i of the report is request i of the measured file (the trace is sorted by arrival for
the simulator and mapped back). Errors are relative, (predicted - measured) / measured, per
request; a report gives, per metric (TTFT, ITL, E2E), the median / mean / p90 of the signed and
of the absolute errors over the requests both sides finished (ITL: those with output > 1).
"""

from __future__ import annotations

import numpy as np

from sim.inputs.config import EngineConfig
from sim.inputs.engines.overhead import EngineOverhead
from sim.run.simulate import simulate
from sim.run.summary import requests_columns
from sim.validate.measured.run import MeasuredRun
from sim.validate.names import dtype_name, engine_name, gpu_name, model_name

METRICS = ("ttft_s", "itl_s", "e2e_s")
MIN_MAX_MODEL_LEN = 2048


def run_config(run: MeasuredRun, engine: str, model: str, hardware: str, tp: int = 1,
               weight_dtype: str = "bf16", extra: dict | None = None) -> EngineConfig:
    """The config to replay `run` with: the named preset, model, GPU, TP and dtype; max_model_len
    large enough for the longest measured request. Unknown names raise InputError."""
    where = run.source
    longest = int((run.prompt_tokens + run.output_tokens).max())
    data = {"engine": engine_name(where, engine), "model": model_name(where, model),
            "hardware": gpu_name(where, hardware), "tp": tp,
            "weight_dtype": dtype_name(where, "weight_dtype", weight_dtype),
            "max_model_len": max(longest + 1, MIN_MAX_MODEL_LEN)}
    data.update(extra or {})
    return EngineConfig.model_validate(data)


def predict_requests(cfg: EngineConfig, run: MeasuredRun, overhead: EngineOverhead | None = None) -> dict:
    """Simulated ttft_s / itl_s / e2e_s per request of `run`, in the file's order (NaN where
    the simulator did not finish a request), plus `finished` (bool)."""
    result = simulate(cfg, run.to_trace(), overhead=overhead)
    cols = requests_columns(result)
    finished = np.asarray(cols["status"]) == "FINISHED"
    order = run.order()
    out = {"finished": np.zeros(len(run), dtype=bool)}
    out["finished"][order] = finished
    for metric, column in (("ttft_s", "ttft_s"), ("itl_s", "tpot_s"), ("e2e_s", "e2e_s")):
        values = np.where(finished, np.asarray(cols[column], dtype=float), np.nan)
        out[metric] = np.empty(len(run))
        out[metric][order] = values
    return out


def relative_errors(run: MeasuredRun, predicted: dict) -> dict[str, np.ndarray]:
    """Per metric, the relative error of each request where both sides have a value."""
    measured = {"ttft_s": run.ttft_s, "itl_s": run.itl_s, "e2e_s": run.e2e_s}
    errors = {}
    for metric in METRICS:
        meas, pred = measured[metric], predicted[metric]
        ok = np.isfinite(meas) & np.isfinite(pred) & (meas > 0)
        errors[metric] = (pred[ok] - meas[ok]) / meas[ok]
    return errors


def _stats(values: np.ndarray) -> dict:
    if values.size == 0:
        return {k: None for k in ("median", "mean", "p90")}
    return {"median": float(np.median(values)), "mean": float(np.mean(values)), "p90": float(np.percentile(values, 90))}


def residual_report(run: MeasuredRun, predicted: dict) -> dict:
    """{metric: {n, signed: {median, mean, p90}, abs: {...}, measured_mean_ms, predicted_mean_ms}}
    (means over the requests both sides have), plus n_requests and n_unfinished (requests the
    simulator did not finish)."""
    errors = relative_errors(run, predicted)
    measured = {"ttft_s": run.ttft_s, "itl_s": run.itl_s, "e2e_s": run.e2e_s}
    report = {"n_requests": len(run), "n_unfinished": int((~predicted["finished"]).sum())}
    for metric in METRICS:
        both = np.isfinite(measured[metric]) & np.isfinite(predicted[metric])
        report[metric.removesuffix("_s")] = {
            "n": int(errors[metric].size), "signed": _stats(errors[metric]), "abs": _stats(np.abs(errors[metric])),
            "measured_mean_ms": float(measured[metric][both].mean() * 1e3) if both.any() else None,
            "predicted_mean_ms": float(predicted[metric][both].mean() * 1e3) if both.any() else None,
        }
    return report


def loss(run: MeasuredRun, predicted: dict) -> float:
    """The re-simulation fit's objective, the mean of three terms: the mean |relative error| per
    request of ITL and of E2E, and the |relative error| of the mean TTFT. TTFT enters as its mean
    because one request's TTFT jumps by a whole step when a small change moves its arrival to
    the other side of a step boundary; per request it makes the objective too rugged to search.
    A request the simulator did not finish counts as error 1 in each term."""
    errors = relative_errors(run, predicted)
    unfinished = int((~predicted["finished"]).sum())
    parts = [(np.abs(errors[m]).sum() + unfinished) / max(errors[m].size + unfinished, 1) for m in ("itl_s", "e2e_s")]
    both = predicted["finished"]
    ttft_error = abs(np.mean(predicted["ttft_s"][both]) / np.mean(run.ttft_s[both]) - 1.0) if both.any() else 1.0
    share = unfinished / len(run)
    parts.append((1 - share) * ttft_error + share)
    return float(np.mean(parts))
