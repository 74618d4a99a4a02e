"""Turn the team's real vLLM V1 serving runs (`shared/data/validation/vllm_v1_serving_h100/runs.csv`)
into `infersim validate` cases (one row per run x load stage x metric), the file bundled as
`sim/validate/cases/vllm_v1_serving_h100.csv`:

    python -m calibrate.import_serving_runs ../shared/data/validation/vllm_v1_serving_h100/runs.csv \\
        sim/validate/cases/vllm_v1_serving_h100.csv

What the load generator really ran: each run's resolved inference-perf config (`results/config.yaml`
in the source repository) shows `shared_prefix: {num_groups: 10, num_prompts_per_group: 10, ...}`
and no `enable_multi_turn_chat`: the profile's `num_unique_system_prompts` /
`num_users_per_system_prompt` / multi-turn keys were not applied by that build. So every run sends
100 distinct prompts (10 system prompts x 10 questions), single turn, cycled; the measured prompt
lengths (which do not grow) agree. Metrics: mean TTFT, mean E2E, and the per-token time derived
from the two means, (E2E - TTFT) / (max_tokens - 1), as the data's README prescribes (the reported
TPOT counts two timestamps per token); P99 TTFT for the tails (reported, never fitted).

Split (by workload, so every model is in both halves): codegen and roleplay runs are `fit`, general
runs are `score`. The reasoning runs overloaded the server (client timeouts): their rows are kept with
`measured=overloaded` so validation reports whether the simulated server also failed to keep up.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

METRICS = {("e2e_ms", "mean"): "mean_e2e_latency_ms", ("ttft_ms", "mean"): "mean_ttft_ms",
           ("tpot_ms_derived", "mean"): "mean_tpot_ms", ("ttft_ms", "p99"): "p99_ttft_ms"}
SPLIT_BY_WORKLOAD = {"codegen": "fit", "roleplay": "fit", "general": "score", "reasoning": "score"}
ENGINE_PRESET = "vllm@0.15"  # V1 engine; the campaign's image was vllm/vllm-openai:v0.15.1
RESOLVED_PREFIX = {"groups": "10", "per_group": "10"}  # results/config.yaml of every run (see above)


def _workload(experiment: str) -> str:
    return next(name for name in SPLIT_BY_WORKLOAD if experiment.endswith(name))


def case_rows(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        metric = METRICS.get((row["metric"], row["statistic"]))
        if metric is None or row["stage"] == "-1":
            continue
        workload = _workload(row["experiment"])
        stage = int(row["stage"])
        rates = row["stage_rates_rps"].split(";")
        durations = row["stage_durations_s"].split(";")
        quantiles = row["prompt_len_quantiles"].replace("median", "p50")
        args = {"rates": row["stage_rates_rps"], "durations": row["stage_durations_s"], **RESOLVED_PREFIX,
                "system": row["system_prompt_len"], "prompt_quantiles": quantiles,
                "output": row["output_len"].split()[0], "stage": str(stage)}
        if row["status"] != "ok":
            args["measured"] = "overloaded"
        engine_args = (f"policy=radix max_num_batched_tokens={row['max_num_batched_tokens']} "
                       f"max_num_seqs={row['max_num_seqs']} max_model_len={row['max_model_len']} "
                       f"gpu_memory_utilization={row['gpu_memory_utilization']}")
        out.append({
            "case_id": f"{row['experiment'].split('-', 2)[2]}:stage{stage}:{metric}",
            "source": row["source"].replace(f"stage_{stage}_lifecycle_metrics.json", "")
            + f"stage_{stage}_lifecycle_metrics.json",
            "engine": ENGINE_PRESET, "engine_version": row["engine_version"], "model": row["infersim_model"],
            "gpu": row["infersim_hardware"], "tp": row["tp"], "weight_dtype": "bf16", "kv_dtype": "",
            "workload": "shared_prefix_stages",
            "num_requests": str(round(float(rates[stage]) * float(durations[stage]))),
            "engine_args": engine_args, "workload_args": " ".join(f"{k}={v}" for k, v in args.items()),
            "metric": metric, "value": row["value"], "split": SPLIT_BY_WORKLOAD[workload],
            "note": f"status={row['status']}; {row['num_success']} ok / {row['num_failed']} failed (cumulative over "
                    f"stages); CPU KV-offload connector on in the measured server (not modelled: the GPU prefix "
                    f"cache holds the 100 prompts)",
        })
    return out


COLUMNS = ("case_id", "source", "engine", "engine_version", "model", "gpu", "tp", "weight_dtype", "kv_dtype",
           "workload", "num_requests", "engine_args", "workload_args", "metric", "value", "split", "note")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_csv", type=Path)
    parser.add_argument("out_csv", type=Path)
    args = parser.parse_args()
    with args.runs_csv.open(newline="") as handle:
        rows = case_rows(list(csv.DictReader(handle)))
    with args.out_csv.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} cases -> {args.out_csv}")


if __name__ == "__main__":
    main()
