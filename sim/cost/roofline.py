"""Roofline primitives: the time of one op from its FLOPs and bytes, vectorized over numpy arrays.

time = (t_compute^p + t_memory^p)^(1/p) + launches, where
t_compute = flops / (peak * e_compute) and t_memory = bytes / (bandwidth * e_memory).
Because 0 < e <= 1 and the p-norm of two non-negative numbers is at least their max, an op is
never predicted faster than its own physical roofline max(flops/peak, bytes/bandwidth).
"""

from __future__ import annotations

import numpy as np

from sim.inputs.efficiency import Efficiency


def blend(t_compute_s: np.ndarray, t_memory_s: np.ndarray, p: float) -> np.ndarray:
    """Smooth max of compute and memory time (p-norm); exact max when p is infinite."""
    t_compute_s = np.asarray(t_compute_s, dtype=np.float64)
    t_memory_s = np.asarray(t_memory_s, dtype=np.float64)
    if np.isinf(p):
        return np.maximum(t_compute_s, t_memory_s)
    top = np.maximum(t_compute_s, t_memory_s)
    safe_top = np.where(top > 0, top, 1.0)
    ratio_c = t_compute_s / safe_top
    ratio_m = t_memory_s / safe_top
    return top * (ratio_c**p + ratio_m**p) ** (1.0 / p)


def gemm_compute_efficiency(m_tokens: np.ndarray, eff: Efficiency, n_out: np.ndarray | float | None = None,
                            op: str | None = None) -> np.ndarray:
    """Share of peak a GEMM with M rows and N outputs per row reaches, rising with M to its ceiling:

        ceiling(op) * M / (M + half_M),   half_M = half(op) + gemm_half_output_elems / N

    ceiling(op): `gemm_compute_max_by_op[op]` (the op class's own: its N:K aspect, fused kernels),
    else gemm_compute_max. half(op): `gemm_half_tokens_by_op[op]`, else gemm_half_tokens. half_M: the
    rows at which half the ceiling is reached; a narrow output
    (small N, e.g. a TP-8 shard) has fewer output tiles per row to spread over the SMs, so it needs
    more rows (the second term, when the profile sets gemm_half_output_elems and N is given).
    The compute time, FLOPs / (peak * efficiency), is proportional to M + half_M: it rises with M,
    and the efficiency never exceeds the ceiling (<= 1)."""
    m = np.asarray(m_tokens, dtype=np.float64)
    ceiling = (eff.gemm_compute_max_by_op or {}).get(op, eff.gemm_compute_max) if op else eff.gemm_compute_max
    half_m = (eff.gemm_half_tokens_by_op or {}).get(op, eff.gemm_half_tokens) if op else eff.gemm_half_tokens
    if eff.gemm_half_output_elems is not None and n_out is not None:
        half_m = half_m + eff.gemm_half_output_elems / np.asarray(n_out, dtype=np.float64)
    return ceiling * m / (m + half_m)


def op_time_s(
    flops: np.ndarray,
    bytes_: np.ndarray,
    peak_flops: float,
    e_compute: np.ndarray | float,
    bandwidth_bytes_s: float,
    e_memory: float,
    eff: Efficiency,
    n_kernels: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time_s, t_compute_s, t_memory_s) of an op; time includes kernel launches."""
    t_compute = np.asarray(flops, dtype=np.float64) / (peak_flops * np.asarray(e_compute))
    t_memory = np.asarray(bytes_, dtype=np.float64) / (bandwidth_bytes_s * e_memory)
    launch_s = n_kernels * eff.kernel_launch_us * 1e-6
    return blend(t_compute, t_memory, eff.roofline_blend) + launch_s, t_compute, t_memory


def gemm_compute_tokens(m_tokens: np.ndarray, eff: Efficiency) -> np.ndarray:
    """M as the compute term sees it: rounded up to a whole tile of `gemm_tile_tokens` rows
    (a GEMM kernel computes whole output tiles), or M itself when no tile is set. Never below M."""
    m = np.asarray(m_tokens, dtype=np.float64)
    if eff.gemm_tile_tokens is None:
        return m
    return np.ceil(m / eff.gemm_tile_tokens) * eff.gemm_tile_tokens


def gemm_compute_flops(padded_m: np.ndarray, n_out, k_in, eff: Efficiency) -> np.ndarray:
    """FLOPs the compute term runs: 2 * padded M * N * K, or with wave quantization (the profile sets
    gemm_tile_n and gemm_wave_slots) whole waves of output tiles: a kernel of T = ceil(M / tile_m) *
    ceil(N / tile_n) tiles over S slots (SMs) runs ceil(T / S) waves of S tiles each, 2 * tile_m * tile_n
    * K FLOPs per tile, so a shape one tile past a full wave costs a whole extra wave. Never below the
    real FLOPs (waves * S * tile >= T * tile >= M * N)."""
    n_out = np.asarray(n_out, dtype=np.float64)
    if eff.gemm_tile_n is None or eff.gemm_wave_slots is None:
        return 2.0 * padded_m * n_out * k_in
    tile_m, tile_n, slots = eff.gemm_tile_tokens, eff.gemm_tile_n, eff.gemm_wave_slots
    tiles = np.ceil(padded_m / tile_m) * np.ceil(n_out / tile_n)
    waves = np.ceil(tiles / slots)
    return waves * slots * 2.0 * tile_m * tile_n * np.asarray(k_in, dtype=np.float64)


def gemm_time_s(
    m_tokens: np.ndarray,
    n_out: int,
    k_in: int,
    weight_bytes_per_el: float,
    act_bytes_per_el: float,
    peak_flops: float,
    bandwidth_bytes_s: float,
    eff: Efficiency,
    op: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time_s, flops, bytes) of an [M,K] x [K,N] GEMM of op class `op` (None: no class): weights
    read once, activations in and out.

    The compute term runs over `gemm_compute_tokens` rows (>= M), so the time stays at or above
    the roofline of the real FLOPs; the FLOPs returned are the real ones."""
    m = np.asarray(m_tokens, dtype=np.float64)
    flops = 2.0 * m * n_out * k_in
    padded_m = gemm_compute_tokens(m, eff)
    compute_flops = gemm_compute_flops(padded_m, n_out, k_in, eff)
    bytes_ = k_in * n_out * weight_bytes_per_el + m * (k_in + n_out) * act_bytes_per_el
    # small-M cost counted once
    e_c = np.where(m > 0, gemm_compute_efficiency(np.maximum(padded_m, 1), eff, n_out, op), 1.0)
    time, _, _ = op_time_s(compute_flops, bytes_, peak_flops, e_c, bandwidth_bytes_s, eff.memory, eff)
    return np.where(m > 0, time, 0.0), flops, bytes_


def allreduce_time_s(
    payload_bytes: np.ndarray, tp: int, link_bytes_s: float, latency_s: float, eff: Efficiency
) -> np.ndarray:
    """Ring all-reduce: each GPU sends and receives 2*(tp-1)/tp of the payload, plus a latency."""
    payload = np.asarray(payload_bytes, dtype=np.float64)
    if tp <= 1:
        return np.zeros_like(payload)
    wire_bytes = 2.0 * payload * (tp - 1) / tp
    return np.where(payload > 0, latency_s + wire_bytes / (link_bytes_s * eff.allreduce_bus), 0.0)
