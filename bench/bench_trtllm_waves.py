"""How much the long-output TensorRT-LLM rows move with the KV pool: predicted output tok/s of the
trtllm_perf_overview_v0.19.0 Llama-3.3-70B B200 rows at the pool the preset plans and at 99 / 97 / 94 % of it.

Every request of a trtllm-bench run has the same lengths and reserves its whole KV at admission
(GUARANTEED_NO_EVICT), so requests run in waves of floor(pool / blocks per request); 1500 requests of
128 + 4096 tokens in waves of 189 take 8 waves, in waves of 187 a 9th wave of 4 requests that still
decodes 4096 steps. Near such a boundary a 1 % error in the pool is a 4-8 % error in throughput:
the scale of what these rows can check. Usage: PYTHONPATH=$PWD python bench/bench_trtllm_waves.py
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.run.simulate import simulate
from sim.run.summary import summarize
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import case_config, case_workload

SHARES = (1.0, 0.99, 0.97, 0.94)


def main() -> int:
    files = [p for p in bundled_case_files() if p.name == "trtllm_perf_overview_v0.19.0.csv"]
    print(f"{'case':48s} {'split':5s} {'measured':>9s} " + " ".join(f"{f'{s:.0%} pool':>14s}" for s in SHARES))
    for case in load_cases(files):
        if (case.output_len or 0) < 2048 or (case.model, case.gpu) != ("Llama-3.3-70B", "B200"):
            continue
        cfg = case_config(case)
        blocks = summarize(simulate(cfg, case_workload(case, 1)))["num_gpu_blocks"]
        cells = []
        for share in SHARES:
            run = cfg.model_copy(update={"num_gpu_blocks_override": int(blocks * share)})
            predicted = summarize(simulate(run, case_workload(case, case.num_requests)))["output_throughput_tok_s"]
            cells.append(f"{predicted:8.0f} {100 * (predicted / case.value - 1):+5.1f}")
        print(f"{case.case_id:48s} {case.split:5s} {case.value:9.0f} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
