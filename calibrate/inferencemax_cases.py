"""Write the bundled validation cases of the InferenceMAX H200 / B200 development set.

    python -m calibrate.inferencemax_cases SHARED/data/validation/inferencemax_h200_b200/results.csv \
        sim/validate/cases/inferencemax_h200_b200.csv

One case per measured statistic the simulator reads (TTFT / TPOT mean, median, p99; mean E2E; output
tok/s per GPU) of each of the 210 closed-loop experiments, with the row's source (the raw result
artifact and the launch script), the engine knobs of the launch script as `engine_args`, and in
`note` every knob that moves the result and that infersim does not model. ITL (gaps between streamed
chunks) and total tok/s per GPU (output + input rate, the same run) are left out.

Split (stated in sim/validate/cases/README.md): by configuration, every concurrency point of one
configuration on one side. The configuration key is the case_id before its first `:`
(engine-model-weights-gpu-tpT-epE-dpaD-ISLxOSL); `assign_splits` walks each engine's configurations in
SHA-256 order of their keys and puts one in fit while the engine's fit experiments stay at most half.
"""

from __future__ import annotations

import csv
import hashlib
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ENGINES = {"SGLang": "sglang", "vLLM": "vllm", "TensorRT-LLM": "trtllm"}
METRICS = {("ttft", "mean"): "mean_ttft_ms", ("ttft", "median"): "median_ttft_ms", ("ttft", "p99"): "p99_ttft_ms",
           ("tpot", "mean"): "mean_tpot_ms", ("tpot", "median"): "median_tpot_ms", ("tpot", "p99"): "p99_tpot_ms",
           ("e2e", "mean"): "mean_e2e_latency_ms",
           ("output_throughput_per_gpu", "value"): "output_throughput_per_gpu_tok_s"}
RANGE_RATIO = "0.8"
COLUMNS = ("case_id", "source", "engine", "engine_version", "model", "gpu", "tp", "weight_dtype", "kv_dtype",
           "workload", "num_requests", "input_len", "output_len", "concurrency", "engine_args", "workload_args",
           "metric", "value", "split", "note")


def config_order(config_key: str) -> str:
    """Where a configuration stands in the split's order: the hex SHA-256 of its key (blind to the values)."""
    return hashlib.sha256(config_key.encode()).hexdigest()


def assign_splits(experiments_per_config: dict[str, int]) -> dict[str, str]:
    """fit / score per configuration key. Per engine (the key's text before its first `-`), the
    configurations in SHA-256 order of their keys: one goes to fit while the engine's fit
    experiments stay at most half of its experiments, else to score (later, smaller ones may still
    fit). Every concurrency point of a configuration is on its side."""
    splits: dict[str, str] = {}
    by_engine: dict[str, list[str]] = defaultdict(list)
    for key in experiments_per_config:
        by_engine[key.split("-", 1)[0]].append(key)
    for keys in by_engine.values():
        total = sum(experiments_per_config[k] for k in keys)
        fit = 0
        for key in sorted(keys, key=config_order):
            if 2 * (fit + experiments_per_config[key]) <= total:
                fit += experiments_per_config[key]
                splits[key] = "fit"
            else:
                splits[key] = "score"
    return splits


def _first_int(text: str) -> int:
    return int(re.search(r"\d+", text).group())


def _nominal_length(text: str) -> int:
    """`uniform int [819,1024] ...` -> 1024 (the L of [int(0.8 L), L])."""
    return int(re.search(r"\[(\d+),(\d+)\]", text).group(2))


def _weight_dtype(row: dict) -> tuple[str, str]:
    """(infersim weight dtype, short name for the key)."""
    text = row["weight_dtype"]
    if "NVFP4" in text:
        return "nvfp4", "nvfp4"
    if "MXFP4" in text:
        return "auto", "mxfp4"  # gpt-oss as stored: MXFP4 experts, bf16 attention / router / embeddings
    return "fp8", "fp8"


def _kv_dtype(text: str) -> str:
    return "fp8" if text.startswith("fp8") else "bf16"  # `auto (not set)`: the model dtype, bf16


def _max_num_seqs(text: str, concurrency: int, isl: int, osl: int) -> int:
    if text.startswith("max-num-seqs = concurrency"):
        return concurrency
    if text.startswith("512 for 1k/1k"):
        return 512 if (isl, osl) == (1024, 1024) else 256
    return _first_int(text)


def _num_requests(text: str, concurrency: int, osl: int) -> tuple[int, str]:
    if text.strip() == "concurrency x 10":
        return 10 * concurrency, ""
    why = "num_requests: the docker runners' rule (x50 for OSL 1024, x20 for OSL 8192) assumed; a slurm runner " \
          "sends x10 and the runner was not recorded"
    return (50 if osl <= 1024 else 20) * concurrency, why


def _memory_share(text: str) -> str:
    found = re.search(r"(?:mem-fraction-static|free_gpu_memory_fraction|gpu-memory-utilization) (0\.\d+)", text)
    return found.group(1)


def _engine_args_and_note(engine: str, row: dict, concurrency: int, isl: int, osl: int) -> tuple[str, list[str]]:
    """The launch script's knobs as infersim config keys, and the knobs infersim does not model."""
    seqs = _max_num_seqs(row["max_num_seqs_or_batch"], concurrency, isl, osl)
    budget_text = row["max_num_batched_tokens"]
    tokens = _first_int(budget_text)
    share = _memory_share(budget_text)
    args = [f"max_num_seqs={seqs}", f"gpu_memory_utilization={share}"]
    tp, ep, dpa = int(row["tp"]), int(row["ep"]), row["dp_attention"] == "true"
    unmodelled = []
    if engine == "sglang":
        # radix cache off: chunked prefill, no prefix cache; max-prefill-tokens 16384 (SGLang's default) unless set
        args += ["policy=chunked", f"chunk_size={tokens}", f"max_num_batched_tokens={max(tokens, 16384)}"]
        graph = re.search(r"cuda-graph-max-bs (\d+)", row["max_num_seqs_or_batch"])
        graph_bs = int(graph.group(1)) if graph else seqs  # `max-running-requests = cuda-graph-max-bs`
        unmodelled += ["SGLang 0.5.6 run with the sglang preset (0.4.x: overlap scheduler, defaults of that version)",
                       f"cuda-graph-max-bs {graph_bs} (the preset captures decode batches up to 160)",
                       "attention backend " + ("trtllm_mla" if "trtllm_mla" in budget_text else "flashinfer")
                       + " and MoE kernel " + ("flashinfer_trtllm" if "flashinfer_trtllm" in budget_text else
                                                "the default (Triton fused MoE)")
                       + " (priced by the GPU profile, not per kernel: issue 46 item 1)",
                       "mem-fraction-static read as gpu_memory_utilization"]
    elif engine == "vllm":
        args += ["policy=chunked", f"max_num_batched_tokens={tokens}"]  # prefix caching off
        unmodelled += ["vLLM 0.13 run with the vllm preset (0.15: async scheduling on, as in the run)",
                       "MXFP4 MoE kernel (" + ("FlashInfer / TRT-LLM MoE" if row["infersim_hardware"] == "b200"
                                               else "Marlin / Triton w4a16") + ") priced by the GPU profile"]
        if "allreduce-RMS" in budget_text:
            unmodelled.append("all-reduce + RMSNorm fusion pass")
    else:
        args += ["policy=chunked", f"max_num_batched_tokens={tokens}"]  # block reuse off
        unmodelled += ["TensorRT-LLM 1.2.0rc2 run with the trtllm preset (1.0)",
                       "CUDA graphs captured up to the concurrency with padding (the preset's capture list)",
                       "MoE backend TRTLLM (MXFP4) priced by the GPU profile",
                       "free_gpu_memory_fraction read as the preset's share of free memory"]
        if dpa:
            unmodelled.append("attention-DP balancing settings not recorded (ADP balance not modelled)")
    if dpa:
        if engine != "trtllm" or ep != tp:
            raise ValueError(f"DP attention outside TensorRT-LLM's tp = ep recipe: {row['experiment']}")
        args.append("enable_attention_dp=true")
    elif ep > 1:
        args.append(f"ep={ep}")
    return " ".join(args), unmodelled


def config_key(row: dict) -> str:
    engine = ENGINES[row["engine"]]
    _, weights = _weight_dtype(row)
    isl, osl = _nominal_length(row["input_len"]), _nominal_length(row["output_len"])
    dpa = 1 if row["dp_attention"] == "true" else 0
    return (f"{engine}-{row['infersim_model']}-{weights}-{row['infersim_hardware']}-tp{row['tp']}-ep{row['ep']}"
            f"-dpa{dpa}-{isl}x{osl}")


STALL_P99_TTFT_MS = 30_000.0  # judgement: no closed loop of these sizes queues a request this long while serving
STALL_MEDIAN_SHARE = 0.2  # ... with the median request waiting under a fifth of it


def startup_stalls(rows: list[dict]) -> set[str]:
    """Experiments whose first wave of requests sat through a one-off start-up stall: p99 TTFT over
    30 s with the median TTFT under a fifth of it. In the source, 14 SGLang B200 runs show it: p99
    TTFT ~70 s, median 0.2 - 2 s, (mean - median) / p99 ~ 0.1, i.e. the first `concurrency` of
    10 x concurrency requests waited ~70 s (a warm-up before serving, not serving behaviour)."""
    ttft: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row["metric"] == "ttft":
            ttft[row["experiment"]][row["statistic"]] = float(row["value"])
    return {name for name, v in ttft.items()
            if v["p99"] > STALL_P99_TTFT_MS and v["median"] < STALL_MEDIAN_SHARE * v["p99"]}


STALL_NOTE = ("start-up stall in the measured run (p99 TTFT > 30 s, median under a fifth of it: the first wave of "
              "requests waited ~70 s before serving began); its mean / p99 TTFT, mean E2E and throughput include "
              "the stall and are not compared (workload_args measured=startup_stall); num_requests concurrency x 10: "
              "(mean - median) / p99 TTFT ~ 0.1 = concurrency / num_requests (a slurm runner)")


def case_rows(rows: list[dict]) -> list[dict]:
    out, seen = [], set()
    stalled = startup_stalls(rows)
    for row in rows:
        metric = METRICS.get((row["metric"], row["statistic"]))
        if metric is None:
            continue
        if row["status"] != "ok" or row["disagg"] != "no" or row["pp"] != "1":
            raise ValueError(f"unexpected row: {row['experiment']}")
        engine = ENGINES[row["engine"]]
        key = config_key(row)
        concurrency = _first_int(row["request_rate_or_concurrency"])
        isl, osl = _nominal_length(row["input_len"]), _nominal_length(row["output_len"])
        case_id = f"{key}:c{concurrency}:{metric}"
        if case_id in seen:
            raise ValueError(f"two experiments share {case_id}")
        seen.add(case_id)
        n_requests, count_note = _num_requests(row["num_requests"], concurrency, osl)
        workload_args = f"range_ratio={RANGE_RATIO}"
        if row["experiment"] in stalled:
            n_requests, count_note = 10 * concurrency, STALL_NOTE
            workload_args += " measured=startup_stall"
        args, unmodelled = _engine_args_and_note(engine, row, concurrency, isl, osl)
        weights, _ = _weight_dtype(row)
        note = "; ".join(filter(None, [row["experiment"], row["note"], count_note,
                                       "not modelled: " + ", ".join(unmodelled)]))
        out.append({
            "case_id": case_id, "source": row["source"], "engine": engine,
            "engine_version": f"{row['engine']} {row['engine_version']}", "model": row["infersim_model"],
            "gpu": row["infersim_hardware"], "tp": row["tp"], "weight_dtype": weights,
            "kv_dtype": _kv_dtype(row["kv_dtype"]), "workload": "closed_loop", "num_requests": n_requests,
            "input_len": isl, "output_len": osl, "concurrency": concurrency, "engine_args": args,
            "workload_args": workload_args, "metric": metric, "value": row["value"],
            "split": "", "note": note,
        })
    experiments = Counter(row["case_id"].split(":")[0] for row in out if row["metric"] == "mean_ttft_ms")
    splits = assign_splits(dict(experiments))
    return [{**row, "split": splits[row["case_id"].split(":")[0]]} for row in out]


def main(argv: list[str]) -> None:
    source, target = Path(argv[0]), Path(argv[1])
    with open(source, newline="", encoding="utf-8") as handle:
        rows = case_rows(list(csv.DictReader(handle)))
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    configs = defaultdict(set)
    for row in rows:
        configs[(row["engine"], row["split"])].add(row["case_id"].split(":")[0])
    print(f"{len(rows)} cases -> {target}; configurations per (engine, split): "
          + ", ".join(f"{e}/{s} {len(k)}" for (e, s), k in sorted(configs.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
