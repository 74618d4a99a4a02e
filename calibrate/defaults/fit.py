"""The bundled profiles' fitted defaults: fit every bundled Vidur measurement of a GPU, derive the
profiles without measurements by stated rules, and write the numbers into hwprofiles/*.yaml.

Usage: python -m calibrate.defaults [--write]   (prints the numbers; --write updates the YAMLs)

Measured-fit (all bundled data for that GPU, calibrate/data/vidur):
- h100-sxm: GEMM terms from the H100 mlp.csv of Llama-2-7B, Llama-2-70B, CodeLlama-34B (every TP);
  elementwise memory efficiency from the same files' norm/rotary/activation/add kernels;
  collectives (NCCL all-reduce per TP 2/4/8, send/recv) from network/h100_dgx.
- a100-80g-sxm: the same from the A100 mlp.csv of Llama-2-7B/70B, Llama-3-8B/70B and network/a100_dgx.
Derived (rules, written into each profile's `sources`):
- same architecture -> same compute and memory efficiencies (h200, h100-pcie <- h100-sxm;
  a100-80g-pcie <- a100-80g-sxm); bandwidth and peaks stay each profile's datasheet numbers, so
  memory-bound ops scale with bandwidth and compute-bound ones with the peak.
- h200 collectives <- h100_dgx (the same NVLink4 / NVSwitch HGX board).
- PCIe cards bridged in pairs: Vidur's pairwise-NVLink setups are exactly that (4x H100 NVL; 4x A100
  PCIe): TP-2 all-reduce -> `nvlink_bridge`, TP-4 all-reduce (over PCIe between the pairs) -> `nccl`.
- `custom` all-reduce (vLLM / TRT-LLM one-shot kernels) on H100: a fit to published H100 latencies
  (sglang PR 2904, `CUSTOM_AR_H100`; the two-shot regime of 4 GPUs from vLLM's own CUDA-graph timings,
  `CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4`); elsewhere NCCL's numbers with latency scaled by H100's
  custom/NCCL latency ratio per TP (rule, stated in `sources`).
Guessed: b200, l40s, mi300x keep their documented starting guesses (no measurements of them).
Attention efficiencies come from published FlashAttention figures (`ATTENTION`), not from fits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calibrate.fit import fit_profile
from calibrate.fit_collectives import fit_link
from calibrate.measurements import GEMM_OPS
from calibrate.report import residual_rows
from calibrate.uncertainty import GUESSED_SIGMA, log_sigma
from calibrate.vidur_import import bundled_vidur_path, read_measurement_file
from sim.inputs.hardware import load_hardware

H100_MODELS = {
    "Llama-2-7B": "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "Llama-2-70B": "compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv",
    "CodeLlama-34B": "compute/h100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv",
}
A100_MODELS = {
    "Llama-2-7B": "compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "Llama-2-70B": "compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv",
    "Llama-3-8B": "compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv",
    "Llama-3-70B": "compute/a100/meta-llama/Meta-Llama-3-70B/mlp.csv",
}
MEASURED = {
    "h100-sxm": (H100_MODELS, "h100_dgx"),
    "a100-80g-sxm": (A100_MODELS, "a100_dgx"),
}
# sglang PR 2904 (github.com/sgl-project/sglang/pull/2904), H100, no CUDA graph, "custom allreduce"
# table: (elements of bf16, latency ms per TP 2/4/8). Payload bytes = 2 x elements.
CUSTOM_AR_H100 = {
    512: (0.0037, 0.0048, 0.0059), 4096: (0.0039, 0.0037, 0.0057), 32768: (0.0045, 0.0048, 0.0078),
    262144: (0.0079, 0.0139, 0.0167), 524288: (0.0125, 0.0202, 0.0221), 1048576: (0.0199, 0.0311, 0.0338),
}  # fmt: skip
# vLLM's own custom all-reduce, two-shot (`ca_2stage`), 4x H100 SXM, bf16 [tokens, 8192] messages, timed
# inside a CUDA graph of 10 all-reduces with registered buffers (benchmarks/kernels/
# benchmark_device_communicators.py), as vLLM's decode steps run it: message MiB -> ms, one column per
# run: vLLM PR 24111 (2025-09) and PR 24532 (2025-09), H100 TP=4 tables. sglang's eager-mode figures
# above include the copy-in and launch a graphed step does not pay (2 MiB: 31 us vs 26-27 us here).
CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4 = {
    0.5: (0.017, 0.017), 1.0: (0.018, 0.018), 1.5: (0.027, 0.025), 2.0: (0.027, 0.026), 3.0: (0.035, 0.035),
    4.0: (0.043, 0.042),
}  # fmt: skip
# Prefill attention compute efficiency, from published forward-pass throughput (bf16/fp16, head dim 128):
ATTENTION = {
    "hopper": (0.62, "FlashAttention-3 forward, head dim 128, B*S = 16k, H*D = 2048: 430-621 TFLOP/s on H100 "
                     "for S = 512..16384 (pytorch/benchmark PR 2391, flash_v3 column); 620.7 / 989.4 = 0.63 at 16k, "
                     "0.62 taken for causal (masked diagonal tiles); FA3 paper (arXiv 2407.08608) reports up to "
                     "740 TFLOP/s (75 %) at head dim 256."),
    "ampere": (0.62, "FlashAttention-2 (arXiv 2307.08691): forward pass reaches 50-73 % of A100 peak; 0.62 taken "
                     "for causal head dim 128 at long sequences (middle of that range)."),
}
ELEMENTWISE_VIDUR = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add", "add")


def gemm_frame(models: dict[str, str]) -> dict[str, pd.DataFrame]:
    return {name: read_measurement_file(bundled_vidur_path(rel)) for name, rel in models.items()}


def network_frame(setup: str) -> pd.DataFrame:
    frames = [read_measurement_file(bundled_vidur_path(f"network/{setup}/{name}.csv"))
              for name in ("all_reduce", "send_recv")]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def elementwise_rows(models: dict[str, str]) -> pd.DataFrame:
    """Per Vidur mlp.csv row: tokens, our elementwise bytes (sim/cost/layer_ops.py `elementwise_op`)
    and Vidur's measured time of the same kernels (the residual add counted twice per layer)."""
    out = []
    for name, rel in models.items():
        raw = pd.read_csv(bundled_vidur_path(rel))
        keys = ["num_tokens", "num_tensor_parallel_workers"]
        times = raw[keys + [f"time_stats.{op}.median" for op in set(ELEMENTWISE_VIDUR)]].groupby(keys).median()
        shape = raw.iloc[0]
        for (tokens, tp), row in times.iterrows():
            h, heads, kv = int(shape["n_embd"]), int(shape["n_head"]), int(shape["n_kv_head"])
            d, mlp = h // heads, int(shape["n_expanded_embd"])
            width = 4 * h + 2 * (heads // tp + max(1, kv // tp)) * d + 3 * mlp // tp + 6 * h
            time_s = sum(row[f"time_stats.{op}.median"] for op in ELEMENTWISE_VIDUR) * 1e-3
            out.append({"model": name, "tokens": tokens, "tp": tp, "bytes": tokens * width * 2.0, "time_s": time_s})
    return pd.DataFrame(out)


def fit_elementwise(rows: pd.DataFrame, bandwidth_bytes_s: float) -> tuple[float, float, np.ndarray]:
    """(memory efficiency, fixed us per layer, relative residuals) minimising the soft-L1 relative
    error of bytes / (bw e) + fixed."""
    from scipy.optimize import least_squares

    bytes_, time_s = rows["bytes"].to_numpy(), rows["time_s"].to_numpy()

    def residuals(x):
        return (bytes_ / (bandwidth_bytes_s * np.exp(x[0])) + x[1] * 1e-6) / time_s - 1.0

    result = least_squares(residuals, [np.log(0.7), 10.0], bounds=([np.log(1e-3), 0.0], [0.0, 1e4]),
                           loss="soft_l1", f_scale=0.05)  # fmt: skip
    return float(np.exp(result.x[0])), float(result.x[1]), residuals(result.x)


# The custom all-reduce kernel switches from one-shot to two-shot (reduce-scatter + all-gather) at
# these message sizes on a full-NVLink group (vLLM csrc/custom_all_reduce.cuh: one-shot for 2 GPUs, for
# <= 4 GPUs below 512 KiB, for <= 8 GPUs below 256 KiB): each algorithm gets its own line, one line
# across the switch would overstate what larger messages cost.
TWO_SHOT_FROM_BYTES = {4: 524288, 8: 262144}


def custom_allreduce_h100() -> dict[int, dict]:
    sizes = np.array(list(CUSTOM_AR_H100), dtype=float) * 2.0
    out = {}
    for i, tp in enumerate((2, 4, 8)):
        times = np.array([v[i] for v in CUSTOM_AR_H100.values()]) * 1e-3
        switch = TWO_SHOT_FROM_BYTES.get(tp)
        if switch is None:
            out[tp] = fit_link(sizes, times)[0].model_dump(exclude_none=True)
            continue
        one = fit_link(sizes[sizes < switch], times[sizes < switch])[0]
        two = fit_link(sizes[sizes >= switch], times[sizes >= switch])[0] if tp != 4 else two_shot_graphed_tp4()
        out[tp] = {**one.model_dump(exclude_none=True), "above_bytes": float(switch),
                   "above": two.model_dump(exclude_none=True)}
    return out


def two_shot_graphed_tp4():
    """The two-shot regime of 4 GPUs: a fit to vLLM's CUDA-graph timings (`CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4`)."""
    mib = 1024.0 * 1024.0
    sizes = np.array([size * mib for size, runs in CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4.items() for _ in runs])
    times = np.array([ms * 1e-3 for runs in CUSTOM_AR_H100_TWO_SHOT_GRAPHED_TP4.values() for ms in runs])
    return fit_link(sizes, times)[0]


def fit_measured_gpu(profile: str) -> dict:
    """Fitted terms, collectives, residuals and uncertainty for one measured GPU."""
    models, setup = MEASURED[profile]
    base = load_hardware(profile)
    gemms = gemm_frame(models)
    network = network_frame(setup)
    frame = pd.concat(list(gemms.values()) + [network], ignore_index=True)
    fit = fit_profile(frame, base, tables=False)
    hw = fit.hardware
    per_model = {}
    gemm_errors = []
    for name, rows in gemms.items():
        res = residual_rows(rows, hw)
        gemm_errors += list(res["rel_error"])
        per_model[name] = {op: (float(g["ape"].mean()), float(g["rel_error"].mean())) for op, g in res.groupby("op")}
    elementwise = elementwise_rows(models)
    e_elem, fixed_us, elem_rel = fit_elementwise(elementwise, hw.hbm_bandwidth_bytes_s)
    net_res = residual_rows(network, hw)
    return {
        "terms": fit.classes[0].terms | {"elementwise_memory": e_elem, "elementwise_fixed_us": fixed_us},
        "collectives": hw.collectives.model_dump(exclude_none=True),
        "collective_residuals": fit.collective_residuals,
        "gemm_residuals": per_model,
        "elementwise_mape": float(np.mean(np.abs(elem_rel))),
        "uncertainty": {
            "gemm": log_sigma(gemm_errors), "gemm_table": GUESSED_SIGMA, "elementwise": log_sigma(elem_rel),
            "attention": GUESSED_SIGMA, "collective": log_sigma(net_res["rel_error"]), "overhead": GUESSED_SIGMA,
        },
    }


__all__ = ["ATTENTION", "GEMM_OPS", "custom_allreduce_h100", "fit_measured_gpu", "network_frame"]
