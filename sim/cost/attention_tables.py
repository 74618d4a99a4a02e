"""Measured attention tables: `calibration.tables.attention` of a calibrated profile.

Attention time depends on a whole batch (lengths, contexts), not on one number, so its table holds
the measured/smooth-model RATIO along one axis per head shape: prefill along causal query-key pairs,
decode (per KV block size) along KV tokens read. The simulated time is the smooth model's times the
ratio interpolated in log-log space; outside the measured range the edge ratio holds, which is the
smooth model scaled to meet the table at its edge. At a measured point the time equals the
measurement (the ratio was taken against the same formulas, calibrate/predict.py).

    calibration:
      tables:
        attention:
          - {kind: prefill_attention, n_heads: 32, n_kv_heads: 8, head_dim: 128, bytes_per_el: 2,
             block_size: null, x: [pairs...], ratio: [...]}
          - {kind: decode_attention, ..., block_size: 16, x: [kv tokens...], ratio: [...]}
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.errors import InputError

KINDS = ("prefill_attention", "decode_attention")


@dataclass(frozen=True)
class RatioTable:
    log_x: np.ndarray
    log_ratio: np.ndarray

    def factor(self, x):
        """Ratio at `x` (scalar or array; x <= 0 gets the smallest-x ratio)."""
        return np.exp(np.interp(np.log(np.maximum(x, 1e-300)), self.log_x, self.log_ratio))


def _parse(entry: dict, where: str, index: int) -> tuple[tuple, RatioTable]:
    field = f"calibration.tables.attention[{index}]"
    if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
        raise InputError(where, f"{field}.kind", " | ".join(KINDS))
    x = np.asarray(entry.get("x") or [], dtype=np.float64)
    ratio = np.asarray(entry.get("ratio") or [], dtype=np.float64)
    if x.ndim != 1 or x.size < 1 or np.any(x <= 0) or np.any(np.diff(x) <= 0):
        raise InputError(where, f"{field}.x", "strictly increasing values > 0")
    if ratio.shape != x.shape or not np.all(np.isfinite(ratio)) or np.any(ratio <= 0):
        raise InputError(where, f"{field}.ratio", "one finite ratio > 0 per x")
    block = entry.get("block_size") if entry["kind"] == "decode_attention" else None
    key = (entry["kind"], int(entry["n_heads"]), int(entry["n_kv_heads"]), int(entry["head_dim"]),
           int(entry["bytes_per_el"]), None if block is None else int(block))  # fmt: skip
    return key, RatioTable(np.log(x), np.log(ratio))


def attention_tables(calibration: dict | None, where: str) -> dict[tuple, RatioTable]:
    """All attention ratio tables of a profile, by (kind, heads, kv heads, head dim, bytes, block)."""
    entries = ((calibration or {}).get("tables") or {}).get("attention") or []
    return dict(_parse(entry, where, i) for i, entry in enumerate(entries))


def ratio_entry(kind: str, n_heads: int, n_kv_heads: int, head_dim: int, bytes_per_el: int,
                block_size: int | None, x, ratio) -> dict:
    return {"kind": kind, "n_heads": int(n_heads), "n_kv_heads": int(n_kv_heads), "head_dim": int(head_dim),
            "bytes_per_el": int(bytes_per_el), "block_size": None if block_size is None else int(block_size),
            "x": [float(f"{v:.10g}") for v in x], "ratio": [float(f"{v:.5g}") for v in ratio]}  # fmt: skip
