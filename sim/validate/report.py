"""Validation results as tables: error per case, median |error| per source, fit and score halves."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.validate.run import Prediction


def _median_abs(preds: list[Prediction]) -> float | None:
    errors = [abs(p.error) for p in preds if p.error is not None]
    return float(np.median(errors)) if errors else None


def source_of(pred: Prediction) -> str:
    """What a row of the per-source table groups by: the case file (one publication or campaign),
    or the row's `source` for cases built in memory."""
    return Path(pred.case.file).stem if pred.case.file else pred.case.source


def summary_rows(preds: list[Prediction]) -> list[dict]:
    """One row per source (case file) and one 'all': cases, expressed, median |error| overall / fit
    / score; per metric for sources with several metrics; whether staged runs kept up."""
    sources = sorted({source_of(p) for p in preds})
    rows = []
    for source in sources + ["all"]:
        group = [p for p in preds if source == "all" or source_of(p) == source]
        rows.append(_row(source, [p for p in group if p.case.metric not in TAIL_METRICS]))
        metrics = sorted({p.case.metric for p in group})
        if source != "all" and len(metrics) > 1:
            rows += [_row(f"{source} [{m}]", [p for p in group if p.case.metric == m]) for m in metrics]
    return rows


TAIL_METRICS = ("p99_ttft_ms", "p99_tpot_ms", "p99_e2e_latency_ms")  # reported per metric, left out of a source's
# and the overall median


def engine_metric_rows(preds: list[Prediction]) -> list[dict]:
    """One row per (case engine, metric): cases, expressed, median |error| and median signed error
    (predicted - measured) / measured: the signed one says whether the presets run fast or slow."""
    rows = []
    for engine in sorted({p.case.engine for p in preds}):
        for metric in sorted({p.case.metric for p in preds if p.case.engine == engine}):
            group = [p for p in preds if p.case.engine == engine and p.case.metric == metric]
            signed = [p.error for p in group if p.error is not None]
            rows.append({"engine": engine, "metric": metric, "n_cases": len(group),
                         "n_cannot_express": sum(p.predicted is None for p in group),
                         "median_abs_error": _median_abs(group),
                         "median_signed_error": float(np.median(signed)) if signed else None})
    return rows


def kept_up_rows(preds: list[Prediction]) -> list[dict]:
    """Per staged run and stage: whether the measured and the simulated server kept up."""
    seen: dict[str, dict] = {}
    for p in preds:
        if p.kept_up is None:
            continue
        key = p.case.case_id.rsplit(":", 1)[0]
        seen[key] = {"stage": key, "split": p.case.split, "simulated_kept_up": p.kept_up,
                     "measured_kept_up": p.case.workload_args.get("measured") != "overloaded"}
    return list(seen.values())


def _row(source: str, group: list[Prediction]) -> dict:
    return {
            "source": source,
            "n_cases": len(group),
            "n_cannot_express": sum(p.predicted is None for p in group),
            "median_abs_error": _median_abs(group),
            "median_abs_error_fit": _median_abs([p for p in group if p.case.split == "fit"]),
            "median_abs_error_score": _median_abs([p for p in group if p.case.split == "score"]),
            "n_fit": sum(p.case.split == "fit" for p in group),
            "n_score": sum(p.case.split == "score" for p in group),
    }


def case_rows(preds: list[Prediction]) -> list[dict]:
    return [{
        "case_id": p.case.case_id, "source": p.case.source, "engine": p.engine, "model": p.case.model,
        "gpu": p.case.gpu, "tp": p.case.tp, "weight_dtype": p.case.weight_dtype, "workload": p.case.workload,
        "input_len": p.case.input_len, "output_len": p.case.output_len, "num_requests": p.case.num_requests,
        "n_simulated": p.n_simulated, "metric": p.case.metric, "measured": p.case.value, "predicted": p.predicted,
        "error": p.error, "split": p.case.split,
        "status": "ok" if p.predicted is not None else f"cannot express: {p.reason}",
    } for p in preds]


def report_dict(preds: list[Prediction]) -> dict:
    return {"cases": case_rows(preds), "by_source": summary_rows(preds), "kept_up": kept_up_rows(preds)}
