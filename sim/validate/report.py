"""Validation results as tables: error per case, median |error| per source, fit and score halves."""

from __future__ import annotations

import numpy as np

from sim.validate.run import Prediction


def _median_abs(preds: list[Prediction]) -> float | None:
    errors = [abs(p.error) for p in preds if p.error is not None]
    return float(np.median(errors)) if errors else None


def summary_rows(preds: list[Prediction]) -> list[dict]:
    """One row per source (and one 'all'): cases, expressed, median |error| overall / fit / score."""
    sources = sorted({p.case.source for p in preds})
    rows = []
    for source in sources + ["all"]:
        group = [p for p in preds if source == "all" or p.case.source == source]
        rows.append({
            "source": source,
            "n_cases": len(group),
            "n_cannot_express": sum(p.predicted is None for p in group),
            "median_abs_error": _median_abs(group),
            "median_abs_error_fit": _median_abs([p for p in group if p.case.split == "fit"]),
            "median_abs_error_score": _median_abs([p for p in group if p.case.split == "score"]),
            "n_fit": sum(p.case.split == "fit" for p in group),
            "n_score": sum(p.case.split == "score" for p in group),
        })
    return rows


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
    return {"cases": case_rows(preds), "by_source": summary_rows(preds)}
