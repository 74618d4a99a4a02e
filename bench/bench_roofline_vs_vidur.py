"""Score the default roofline GEMM model against Vidur's measured H100 per-operator times.

Vidur (github.com/microsoft/vidur, MIT) publishes CUDA-event timings of every projection GEMM of
Llama-2-7B/70B and CodeLlama-34B on H100, per TP shard, for 1..4096 tokens. This script predicts
each row with `sim.cost.roofline.gemm_time_s` and the bundled `h100-sxm` profile (uncalibrated
defaults) and prints the mean absolute percentage error per (model, op) and per op.

Shapes come from the CSV's own columns (n_head, n_kv_head, n_embd, n_expanded_embd, TP), so no
bundled model spec is needed. CSV times are milliseconds; the `.median` column of each op is used.

Usage: python bench/bench_roofline_vs_vidur.py [--data DIR] [--hardware h100-sxm]
The data is not part of the repository (see its PROVENANCE.md); without it the script says how to
get it and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # run as a script from a checkout without `pip install`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.cost.roofline import gemm_time_s
from sim.inputs.dtypes import bytes_per_element, peak_key
from sim.inputs.hardware import HardwareProfile, load_hardware

DEFAULT_DATA_DIR = Path("/work/shared/data/vidur_profiling")
MODEL_CSVS = {
    "Llama-2-7B": "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv",
    "Llama-2-70B": "compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv",
    "CodeLlama-34B": "compute/h100/codellama/CodeLlama-34b-Instruct-hf/mlp.csv",
}
# Vidur's op name -> the cost model's op name
OPS = {
    "attn_pre_proj": "qkv_proj",
    "attn_post_proj": "o_proj",
    "mlp_up_proj": "gate_up_proj",
    "mlp_down_proj": "down_proj",
}
SMALL_M_TOKENS = 64
HOW_TO_GET = """Vidur profiling data not found at {path}.
Get it from https://github.com/microsoft/vidur (MIT), folder data/profiling/compute/h100/, e.g.
  git clone --depth 1 https://github.com/microsoft/vidur && \\
  python bench/bench_roofline_vs_vidur.py --data vidur/data/profiling
(The CSV files are expected under <DIR>/compute/h100/<org>/<model>/mlp.csv.)"""


def shard_shapes(row: pd.Series) -> dict[str, tuple[int, int]]:
    """(N, K) of each projection GEMM on one TP shard, from the CSV's model columns."""
    tp = int(row["num_tensor_parallel_workers"])
    n_heads, n_kv, hidden = int(row["n_head"]), int(row["n_kv_head"]), int(row["n_embd"])
    head_dim = hidden // n_heads
    q_heads_gpu, kv_heads_gpu = n_heads // tp, max(1, n_kv // tp)
    mlp_gpu = int(row["n_expanded_embd"]) // tp
    up_matrices = 2 if bool(row["use_gated_mlp"]) else 1
    return {
        "attn_pre_proj": ((q_heads_gpu + 2 * kv_heads_gpu) * head_dim, hidden),
        "attn_post_proj": (hidden, q_heads_gpu * head_dim),
        "mlp_up_proj": (up_matrices * mlp_gpu, hidden),
        "mlp_down_proj": (hidden, mlp_gpu),
    }


def predict_rows(frame: pd.DataFrame, hw: HardwareProfile, dtype: str = "bf16") -> pd.DataFrame:
    """Long table: one row per (CSV row, op) with measured and predicted seconds."""
    el_bytes = bytes_per_element(dtype)
    peak = hw.peak_flops(peak_key(dtype))
    out = []
    for _, row in frame.iterrows():
        m_tokens = int(row["num_tokens"])
        for op, (n_out, k_in) in shard_shapes(row).items():
            time_s, _, _ = gemm_time_s(
                np.array([m_tokens]), n_out, k_in, el_bytes, el_bytes, peak,
                hw.hbm_bandwidth_bytes_s, hw.efficiency,
            )
            out.append({
                "tp": int(row["num_tensor_parallel_workers"]), "m_tokens": m_tokens, "op": op,
                "measured_s": float(row[f"time_stats.{op}.median"]) * 1e-3,
                "predicted_s": float(time_s[0]),
            })
    return pd.DataFrame(out)


def load_model_rows(data_dir: Path, hw: HardwareProfile) -> pd.DataFrame:
    """Every model's predictions, with exact duplicate CSV rows dropped (as Vidur does)."""
    tables = []
    for model, rel in MODEL_CSVS.items():
        path = data_dir / rel
        if not path.is_file():
            print(f"skipping {model}: {path} not found", file=sys.stderr)
            continue
        frame = pd.read_csv(path).drop_duplicates()
        table = predict_rows(frame, hw)
        table.insert(0, "model", model)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def mape_table(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """MAPE (%) and signed mean error (%) per group, for all M and for M >= SMALL_M_TOKENS."""
    rows = rows.assign(ape=(rows.predicted_s - rows.measured_s).abs() / rows.measured_s * 100,
                       err=(rows.predicted_s - rows.measured_s) / rows.measured_s * 100)
    large = rows[rows.m_tokens >= SMALL_M_TOKENS]
    table = rows.groupby(by).agg(n_rows=("ape", "size"), mape_pct=("ape", "mean"),
                                 mean_err_pct=("err", "mean"))
    table[f"mape_pct_m>={SMALL_M_TOKENS}"] = large.groupby(by)["ape"].mean()
    table["mape_pct_per_tp"] = rows.groupby(by + ["tp"])["ape"].mean().groupby(by).apply(
        lambda s: " ".join(f"{tp}:{v:.0f}" for (*_, tp), v in s.items()))
    return table.round(1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help="Vidur data/profiling folder (holds compute/h100/...)")
    parser.add_argument("--hardware", default="h100-sxm", help="bundled profile name or YAML path")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not any((args.data / rel).is_file() for rel in MODEL_CSVS.values()):
        print(HOW_TO_GET.format(path=args.data))
        return 0
    rows = load_model_rows(args.data, load_hardware(args.hardware))
    pd.set_option("display.width", 200)
    print(f"Roofline GEMM time vs Vidur H100 medians, profile {args.hardware} (defaults), "
          f"{len(rows)} (row, op) pairs")
    print("\nPer (model, op):")
    print(mape_table(rows, ["model", "op"]).to_string())
    print("\nPer op, all models:")
    print(mape_table(rows, ["op"]).to_string())
    print("\nPer op, Llama-2-7B and Llama-2-70B only:")
    print(mape_table(rows[rows.model.str.startswith("Llama-2")], ["op"]).to_string())
    overall = (rows.predicted_s - rows.measured_s).abs() / rows.measured_s * 100
    large = rows.m_tokens >= SMALL_M_TOKENS
    print(f"\nOverall MAPE {overall.mean():.1f}% ; M >= {SMALL_M_TOKENS}: {overall[large].mean():.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
