"""The cost model's time for each measurement row, from the same roofline functions `sim.cost` uses.

A row is one kernel call (one layer, one TP shard), so predictions are per call:
- GEMM ops: `gemm_time_s(m_tokens, n_out, k_in, ...)`.
- decode_attention: `batch_size` sequences, each reading `context_tokens` KV tokens (the new one
  included: cached c = context - 1) in whole blocks of `block_size`; query-key pairs c + 1/2 each,
  as `sim.cost.shapes.attention_load` counts them; memory at the block size's paged efficiency.
- prefill_attention: `batch_size` causal sequences of `context_tokens` new tokens, no cache.
- allreduce: the profile's fitted `collectives` for the row's TP (NCCL), else the ring formula
  `allreduce_time_s(payload_bytes, tp, ...)` with the profile's link and latency.
- send_recv: `collectives.send_recv`, else link latency + payload / link bandwidth.
GEMM rows whose shape is in the profile's measured tables (`calibration.tables`) are answered by
the table, as in the simulator; `answered_by` says which rows were.
A row timed host-bound (calibrate/timing_harness.py) is predicted as max(host floor, kernel), with the
floors the profile records (`efficiency.eager_gemm_floor_us`, `calibration.timing_floor_us`);
`kernel_times_s` is the kernel alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calibrate.measurements import GEMM_OPS
from calibrate.timing_harness import host_bound
from sim.cost.attention_tables import attention_tables
from sim.cost.collectives import allreduce_fit, link_time_s
from sim.cost.roofline import allreduce_time_s, gemm_time_s, op_time_s
from sim.cost.tables import gemm_tables
from sim.inputs.dtypes import bytes_per_element, peak_key
from sim.inputs.hardware import HardwareProfile, LinkFit


def _float(rows: pd.DataFrame, column: str) -> np.ndarray:
    return rows[column].astype("float64").to_numpy()


def _smooth_gemm_s(m, n_out, k_in, hw: HardwareProfile, el_bytes: int, peak: float, op: str) -> np.ndarray:
    return gemm_time_s(m, n_out, k_in, el_bytes, el_bytes, peak, hw.hbm_bandwidth_bytes_s, hw.efficiency, op)[0]


def _gemm(rows: pd.DataFrame, hw: HardwareProfile, el_bytes: int, peak: float) -> np.ndarray:
    m, n_out, k_in = _float(rows, "m_tokens"), _float(rows, "n_out"), _float(rows, "k_in")
    op = str(rows["op"].iloc[0])  # predict_times_s passes one op at a time
    time_s = _smooth_gemm_s(m, n_out, k_in, hw, el_bytes, peak, op)
    tables = gemm_tables(hw.calibration, hw.name)
    for key, table in tables.items():
        mask = (n_out == key[0]) & (k_in == key[1]) & (el_bytes == key[2])
        if mask.any():
            def smooth(x, n=key[0], k=key[1]):
                return _smooth_gemm_s(x, n, k, hw, el_bytes, peak, op)

            time_s[mask] = table.time_at_s(m[mask], smooth)
    return time_s


def answered_by(frame: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Per row: "table" where a measured table answers it (a GEMM shape or attention head shape in
    the profile's tables), "kernel fit" where `calibration.kernel_fits` does (a kernel the simulator
    does not price), else "smooth" (the roofline model)."""
    tables = gemm_tables(hw.calibration, hw.name)
    out = np.full(len(frame), "smooth", dtype=object)
    if kernel_fit_of(hw, "decode_attention") is not None:
        out[(frame["op"] == "decode_attention").to_numpy()] = "kernel fit"
    attn = attention_tables(hw.calibration, hw.name)
    for kind in ("prefill_attention", "decode_attention") if attn else ():
        for i in np.flatnonzero((frame["op"] == kind).to_numpy()):
            row = frame.iloc[i]
            block = int(row["block_size"]) if kind == "decode_attention" else None
            key = (kind, int(row["n_heads"]), int(row["n_kv_heads"]), int(row["head_dim"]),
                   bytes_per_element(str(row["dtype"]), "dtype"), block)  # fmt: skip
            if key in attn:
                out[i] = "table"
    if not tables:
        return out
    sizes = np.array([bytes_per_element(d, "dtype") for d in frame["dtype"].astype(str)])
    n_out = frame["n_out"].astype("Float64").fillna(0).to_numpy(dtype=float)
    k_in = frame["k_in"].astype("Float64").fillna(0).to_numpy(dtype=float)
    for n, k, b in tables:
        out[(n_out == n) & (k_in == k) & (sizes == b)] = "table"
    return out


def _attention(rows, hw, el_bytes, peak, pairs, kv_tokens, e_memory) -> np.ndarray:
    q_heads, kv_heads, head_dim = (_float(rows, c) for c in ("n_heads", "n_kv_heads", "head_dim"))
    n_tokens = _float(rows, "m_tokens")
    flops = 4.0 * head_dim * q_heads * pairs
    bytes_ = kv_tokens * 2 * kv_heads * head_dim * el_bytes + 2.0 * n_tokens * q_heads * head_dim * el_bytes
    eff = hw.efficiency
    time_s, _, _ = op_time_s(flops, bytes_, peak, eff.attention_compute, hw.hbm_bandwidth_bytes_s, e_memory, eff)
    return time_s


def attention_axis(rows: pd.DataFrame) -> np.ndarray:
    """The attention tables' axis per row: causal pairs (prefill) or KV tokens read (decode)."""
    batch, context = _float(rows, "batch_size"), _float(rows, "context_tokens")
    if (rows["op"] == "prefill_attention").all():
        return batch * context * context / 2.0
    block = _float(rows, "block_size")
    return batch * np.ceil(context / block) * block


def smooth_attention_s(rows: pd.DataFrame, hw: HardwareProfile, el_bytes: int, peak: float) -> np.ndarray:
    """The smooth model's attention time per row (one op kind per call)."""
    batch, context = _float(rows, "batch_size"), _float(rows, "context_tokens")
    if (rows["op"] == "prefill_attention").all():
        return _attention(rows, hw, el_bytes, peak, batch * context * context / 2.0, batch * context,
                          hw.efficiency.memory)  # fmt: skip
    block = _float(rows, "block_size")
    e_memory = np.array([hw.efficiency.paged_efficiency(int(b)) for b in block])
    return _attention(rows, hw, el_bytes, peak, batch * (context - 0.5), attention_axis(rows), e_memory)


def _attention_with_tables(rows: pd.DataFrame, hw: HardwareProfile, el_bytes: int, peak: float) -> np.ndarray:
    time_s = smooth_attention_s(rows, hw, el_bytes, peak)
    tables = attention_tables(hw.calibration, hw.name)
    if not tables:
        return time_s
    axis = attention_axis(rows)
    kind = str(rows["op"].iloc[0])
    heads = rows[["n_heads", "n_kv_heads", "head_dim"]].astype("int64").to_numpy()
    blocks = rows["block_size"].astype("Float64").fillna(0).to_numpy(dtype=float)
    for i in range(len(rows)):
        block = int(blocks[i]) if kind == "decode_attention" else None
        table = tables.get((kind, *map(int, heads[i]), el_bytes, block))
        if table is not None:
            time_s[i] *= float(table.factor(axis[i]))
    return time_s


def _allreduce(rows: pd.DataFrame, hw: HardwareProfile, el_bytes: int, peak: float) -> np.ndarray:
    payload, tp = _float(rows, "payload_bytes"), rows["tp"].astype("int64").to_numpy()
    latency_s = hw.interconnect.gpu_link_latency_us * 1e-6
    out = np.empty(len(rows))
    for size in np.unique(tp):
        mask = tp == size
        fit = allreduce_fit(hw, int(size), "nccl")
        if fit is not None:
            out[mask] = link_time_s(payload[mask], fit)
        else:
            out[mask] = allreduce_time_s(payload[mask], int(size), hw.gpu_link_bytes_s, latency_s, hw.efficiency)
    return out


def _send_recv(rows: pd.DataFrame, hw: HardwareProfile, el_bytes: int, peak: float) -> np.ndarray:
    fit = hw.collectives.send_recv if hw.collectives is not None else None
    if fit is None:
        fit = LinkFit(latency_us=hw.interconnect.gpu_link_latency_us, bus_gb_s=hw.interconnect.gpu_link_gb_s)
    return link_time_s(_float(rows, "payload_bytes"), fit)


_PREDICT = {"decode_attention": _attention_with_tables, "prefill_attention": _attention_with_tables,
            "allreduce": _allreduce,
            "send_recv": _send_recv}


def kernel_fit_of(hw: HardwareProfile, op: str) -> dict | None:
    """The profile's fit of a timed kernel the engines do not run (`calibration.kernel_fits[op]`), if any."""
    return ((hw.calibration or {}).get("kernel_fits") or {}).get(op)


def _as_kernel_fit(hw: HardwareProfile, kernel_fit: dict) -> HardwareProfile:
    """`hw` with a kernel fit's paged-attention terms and timing floor (for scoring that kernel only)."""
    terms = kernel_fit["terms"]
    paged = {int(k.split(".")[1]): v for k, v in terms.items() if k.startswith("paged_attention_memory.")}
    efficiency = hw.efficiency.model_copy(update={"paged_attention_memory": paged})
    calibration = {k: v for k, v in (hw.calibration or {}).items() if k != "tables"}
    if "timing_floor_us.decode_attention" in terms:
        calibration["timing_floor_us"] = {"decode_attention": terms["timing_floor_us.decode_attention"]}
    return hw.model_copy(update={"efficiency": efficiency, "calibration": calibration})


def kernel_times_s(frame: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """The kernels' own seconds for every row (what a CUDA-graph replay takes), in row order. Decode rows
    of a profile with a decode `kernel_fits` entry are answered by that fit (the kernel they timed)."""
    out = np.full(len(frame), np.nan)
    for (op, dtype), index in frame.groupby(["op", "dtype"], observed=True).indices.items():
        rows = frame.iloc[index]
        el_bytes = bytes_per_element(dtype, "dtype")
        peak = hw.peak_flops(peak_key(dtype, "dtype"))
        kernel_fit = kernel_fit_of(hw, op)
        row_hw = hw if kernel_fit is None else _as_kernel_fit(hw, kernel_fit)
        out[index] = _PREDICT.get(op, _gemm)(rows, row_hw, el_bytes, peak)
    return out


def timing_floors_s(frame: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Per row: the host dispatch floor its timing holds (0 where none): the profile's
    `efficiency.eager_gemm_floor_us` on host-bound GEMM rows, `calibration.timing_floor_us[op]` on
    host-bound attention rows (calibrate/timing_harness.py says which rows are host-bound)."""
    floors_us = dict((hw.calibration or {}).get("timing_floor_us") or {})
    decode_fit = kernel_fit_of(hw, "decode_attention")
    if decode_fit is not None and "timing_floor_us.decode_attention" in decode_fit["terms"]:
        floors_us["decode_attention"] = decode_fit["terms"]["timing_floor_us.decode_attention"]
    if hw.efficiency.eager_gemm_floor_us is not None:
        floors_us |= dict.fromkeys(GEMM_OPS, hw.efficiency.eager_gemm_floor_us)
    if not floors_us:
        return np.zeros(len(frame))
    per_row = frame["op"].astype(str).map(lambda op: floors_us.get(op, 0.0)).to_numpy(dtype=float)
    return np.where(host_bound(frame), per_row * 1e-6, 0.0)


def predict_times_s(frame: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Predicted seconds for every row of a validated measurements frame, in row order: the
    kernel's time, or the host floor where the row was timed host-bound and the kernel is shorter."""
    return np.maximum(kernel_times_s(frame, hw), timing_floors_s(frame, hw))
