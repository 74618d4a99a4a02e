"""Which rows of a measurements file were timed host-bound: what the timing method put in them.

`calibrate run` (source `infersim-runner`, calibrate/runner.py + timing.py) times each call between
two CUDA events, eagerly, cycling through copies of its inputs; when the copies alone are smaller than
twice the GPU's L2 cache it also overwrites a 2 x L2 scratch buffer before each call (timing.py
`cache_flusher`). That flush keeps the GPU busy while the host issues the timed call, so the events
bracket the kernel alone. Without it the GPU waits for the host, and a short kernel's time is the
host's dispatch time instead: the 25-37 us floor of the H200 run (shared data h200_calibration,
README), while a flushed kernel of the same size shows 6-10 us.

So a runner row is *host-bound* (its time is max(host floor, kernel)) when its inputs were not
flushed, i.e. when copies x bytes per copy >= 2 x L2, with the grid's rotation rule (copies =
min(ceil(2 L2 / bytes), budget / bytes, max copies), calibrate/grid.py). The L2 size per device
name is data (calibrate/data/timing_devices.yaml); a runner row from a device not listed there is
taken as host-bound (the floor may or may not be in it: the fit says so). Rows from other sources
(Vidur imports) are not.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from calibrate.grid import full_grid
from calibrate.measurements import GEMM_OPS, SOURCE_RUNNER
from sim.inputs.dtypes import bytes_per_element

DEVICES_YAML = Path(__file__).resolve().parent / "data" / "timing_devices.yaml"
INDEX_BYTES = 4  # block tables and context lengths are int32 (kernels/paged_attention.py)
FP8_M_MULTIPLE = 16  # torch._scaled_mm needs M padded to 16 (kernels/gemm.py fp8_padded_m)


@lru_cache(maxsize=1)
def device_l2_bytes() -> dict[str, int]:
    """Device name (as torch reports it) -> L2 cache bytes, from calibrate/data/timing_devices.yaml."""
    data = yaml.safe_load(DEVICES_YAML.read_text())
    return {name: int(entry["l2_cache_bytes"]) for name, entry in data["devices"].items()}


def _f(rows: pd.DataFrame, column: str) -> np.ndarray:
    return rows[column].astype("Float64").fillna(0).to_numpy(dtype=float)


def input_bytes(frame: pd.DataFrame) -> np.ndarray:
    """Bytes of one input copy per row, as the runner counted them (0 for ops it does not rotate)."""
    el = np.array([bytes_per_element(d, "dtype") for d in frame["dtype"].astype(str)], dtype=float)
    op = frame["op"].astype(str).to_numpy()
    m, n, k = _f(frame, "m_tokens"), _f(frame, "n_out"), _f(frame, "k_in")
    m = np.where(frame["dtype"].astype(str).to_numpy() == "fp8", np.ceil(m / FP8_M_MULTIPLE) * FP8_M_MULTIPLE, m)
    gemm = (m + n) * k * el
    batch, context = _f(frame, "batch_size"), _f(frame, "context_tokens")
    heads, kv_heads, head_dim = _f(frame, "n_heads"), _f(frame, "n_kv_heads"), _f(frame, "head_dim")
    prefill = batch * context * (heads + 2 * kv_heads) * head_dim * el
    block = np.maximum(_f(frame, "block_size"), 1)
    n_blocks = np.ceil(context / block)
    decode = (batch * heads * head_dim * el + 2 * batch * n_blocks * block * kv_heads * head_dim * el
              + batch * n_blocks * INDEX_BYTES + batch * INDEX_BYTES)  # fmt: skip
    out = np.zeros(len(frame))
    out = np.where(np.isin(op, GEMM_OPS), gemm, out)
    out = np.where(op == "prefill_attention", prefill, out)
    return np.where(op == "decode_attention", decode, out)


def _flushed(n_bytes: float, l2_bytes: int) -> bool:
    grid = full_grid()
    if n_bytes <= 0:
        return False
    wanted = math.ceil(2 * l2_bytes / n_bytes)
    copies = max(1, min(wanted, max(1, grid.rotation_budget_bytes // int(n_bytes)), grid.max_rotation_copies))
    return copies * n_bytes < 2 * l2_bytes


def host_bound(frame: pd.DataFrame) -> np.ndarray:
    """Per row: True where the timing may hold the host's dispatch floor (see the module doc)."""
    runner = (frame["source"].astype(str) == SOURCE_RUNNER).to_numpy()
    device = frame["device"].astype(str).to_numpy()
    timed = np.isin(frame["op"].astype(str).to_numpy(), GEMM_OPS + ("prefill_attention", "decode_attention"))
    n_bytes = input_bytes(frame)
    l2 = device_l2_bytes()
    out = np.zeros(len(frame), dtype=bool)
    for i in np.flatnonzero(runner & timed & (device != "cpu")):
        out[i] = device[i] not in l2 or not _flushed(n_bytes[i], l2[device[i]])
    return out
