"""Measured all-reduce tables: a profile's `calibration.tables.allreduce`, all-reduce times measured per
kind (`nccl`, `custom`) and group size at a ladder of message sizes (imported from AIConfigurator's
nccl_perf / custom_allreduce_perf tables by calibrate/import_aic_collectives.py).

Where a profile has a table for the kind and the exact group size, it answers in place of the fitted
latency + bytes / bandwidth (sim/cost/collectives.py `allreduce_fit` returns it, `link_time_s` reads it):
- inside the measured sizes: log-log interpolation between neighbouring measured sizes;
- below the smallest: the smallest size's time (a small all-reduce is latency-bound: it does not get
  faster with fewer bytes);
- above the largest: that time plus the extra bytes at the bandwidth of the last measured step
  (a large all-reduce is bandwidth-bound), never a log-log extrapolation.

YAML (the file relative to the profile YAML that names it, else to the bundled hwprofiles folder, or absolute):

    calibration:
      tables:
        allreduce: {file: tables/h200/aic-allreduce.npz}

The .npz holds, per kind and group size, `<kind>_tp<N>_bytes` (strictly increasing payload bytes) and
`<kind>_tp<N>_time_us`, and `meta` (a JSON string: source, licence, commit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from sim.errors import InputError

KEY = re.compile(r"^(nccl|custom)_tp(\d+)_bytes$")


@dataclass(frozen=True)
class MeasuredLink:
    """One kind and group size: measured payload bytes and seconds."""

    kind: str
    tp: int
    payload_bytes: np.ndarray
    time_s: np.ndarray

    def time_at_s(self, payload_bytes: np.ndarray) -> np.ndarray:
        """Seconds per all-reduce of each payload (0 where the payload is 0)."""
        payload = np.asarray(payload_bytes, dtype=np.float64)
        lo, hi = self.payload_bytes[0], self.payload_bytes[-1]
        inside = np.exp(np.interp(np.log(np.clip(payload, lo, hi)), np.log(self.payload_bytes), np.log(self.time_s)))
        last_s_per_byte = (self.time_s[-1] - self.time_s[-2]) / (self.payload_bytes[-1] - self.payload_bytes[-2])
        above = self.time_s[-1] + (payload - hi) * max(last_s_per_byte, 0.0)
        return np.where(payload > 0, np.where(payload > hi, above, inside), 0.0)


def _link(data: dict, kind: str, tp: int, where: str) -> MeasuredLink:
    payload = np.asarray(data[f"{kind}_tp{tp}_bytes"], dtype=np.float64)
    times = np.asarray(data.get(f"{kind}_tp{tp}_time_us", np.zeros(0)), dtype=np.float64)
    if (payload.ndim != 1 or payload.size < 2 or not np.all(np.isfinite(payload)) or np.any(payload <= 0)
            or np.any(np.diff(payload) <= 0)):
        raise InputError(where, f"{kind}_tp{tp}_bytes", "at least 2 strictly increasing payloads > 0")
    if times.shape != payload.shape or not np.all(np.isfinite(times)) or np.any(times <= 0):
        raise InputError(where, f"{kind}_tp{tp}_time_us", "one finite time > 0 per payload")
    return MeasuredLink(kind, tp, payload, times * 1e-6)


@lru_cache(maxsize=32)
def load_allreduce_tables(path: str) -> tuple[dict[tuple[str, int], MeasuredLink], str]:
    """({(kind, tp): table}, meta JSON) of the file at `path` (cached)."""
    if not Path(path).is_file():
        raise InputError(path, None, "all-reduce table file not found (calibration.tables.allreduce.file)")
    try:
        data = dict(np.load(path, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise InputError(path, None, f"a .npz written by calibrate.import_aic_collectives ({exc})") from None
    links = {}
    for key in data:
        match = KEY.match(key)
        if match:
            kind, tp = match.group(1), int(match.group(2))
            links[(kind, tp)] = _link(data, kind, tp, path)
    if not links:
        raise InputError(path, None, "at least one <nccl|custom>_tp<N>_bytes / _time_us pair")
    return links, str(data.get("meta", "{}"))


def allreduce_tables(calibration: dict | None, where: str) -> dict[tuple[str, int], MeasuredLink]:
    """The measured all-reduce tables a profile names; {} when it names none."""
    tables = (calibration or {}).get("tables") or {}
    entry = tables.get("allreduce") if isinstance(tables, dict) else None
    if entry is None:
        return {}
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        raise InputError(where, "calibration.tables.allreduce", "a mapping with `file`: the path of a .npz table")
    return load_allreduce_tables(entry["file"])[0]

