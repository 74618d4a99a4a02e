#!/usr/bin/env bash
# One-shot H200 calibration run, for a session that is lent a GPU machine.
#
# STATUS: the a0d7f74 version ran on an H200 (files and findings: /work/shared/data/h200_calibration/).
# This version (issue 39: CUDA-graph timing, split-KV decode, MLA/MoE shapes, fp8 padding, the decode
# bandwidth bench) has NOT run on a GPU yet. Checked on CPU with
# `DEVICE=cpu QUICK=1 OUT=/tmp/x bash calibrate/gpu_script.sh` (toy model; big models on the CPU grid).
#
# Usage (repository root, on the device machine, whose image has torch, triton, pandas, numpy and
# pyyaml but not pydantic, so model specs are read as plain YAML here):
#     OUT=/some/dir bash calibrate/gpu_script.sh
# Writes under $OUT (8 files):
#     env.txt                     nvidia-smi, torch/triton versions, date (provenance of the CSVs)
#     selfcheck-bf16.json         paged decode (torch reference, split-KV Triton, MLA) vs dense attention
#     decode-bench.txt, .json     split-KV decode: batch x context -> TB/s of KV reads (GQA and MLA)
#     measurements-h200-bf16.csv  bf16 GEMMs of $MODELS (TP 1/2/4/8 shards, M 1..16384; MoE: grouped
#                                 experts TP-split and EP; MLA: q_a/q_b/kv_a/kv_b), prefill attention
#                                 (SDPA flash) up to 16k tokens, paged decode (GQA, MLA absorbed)
#     measurements-h200-fp8.csv   fp8 GEMMs (torch._scaled_mm, K/N padded to 16) at the same shapes
#     run-bf16.log, run-fp8.log   the runner's logs (points timed, shapes not timed and why)
# Every point is timed eagerly and from CUDA-graph replays (time_eager_s, time_graph_s; time_s is the
# graph time). Budget: bf16 stops starting points after BF16_BUDGET_S (200 s), fp8 after FP8_BUDGET_S
# (100 s), the bench is killed after 150 s; each python step is killed 60 s after its budget. Whole
# script: about 9 minutes at most.
# Then, here: calibrate fit measurements-h200-*.csv --base h200 --out hwprofiles/h200-calibrated.yaml
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-python3}"
DEVICE="${DEVICE:-cuda}"
QUICK="${QUICK:-0}"
BF16_BUDGET_S="${BF16_BUDGET_S:-200}"
FP8_BUDGET_S="${FP8_BUDGET_S:-100}"
MODELS="${MODELS:-llama-3-8b llama-3-70b mixtral-8x7b deepseek-r1 gpt-oss-120b}"

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv 2>&1 || true
  "$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# Correctness before timing: a kernel that is wrong is not worth timing.
timeout 90 "$PYTHON" -m kernels.selfcheck --device "$DEVICE" --dtype bf16 > "$OUT/selfcheck-bf16.json" 2>&1
echo "selfcheck bf16: exit $? $(head -c 400 "$OUT/selfcheck-bf16.json")"

if [ "$DEVICE" = cuda ]; then
  timeout 150 "$PYTHON" bench/bench_decode_kernel.py --json "$OUT/decode-bench.json" > "$OUT/decode-bench.txt" 2>&1
  echo "decode bench: exit $?"; tail -n 40 "$OUT/decode-bench.txt"
fi

run_dtype() {  # $1 dtype, $2 budget seconds
  timeout $(( $2 + 60 )) "$PYTHON" - "$OUT" "$1" "$2" "$DEVICE" "$QUICK" $MODELS <<'PY' 2>&1 | tee "$OUT/run-$1.log"
import logging
import sys
from types import SimpleNamespace

import yaml

from calibrate.runner import run_calibration, write_measurements
from calibrate.shape_summary import timed_shape_lines
from sim.paths import model_specs_dir

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
out_dir, dtype, budget_s, device, quick = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
specs = [  # plain YAML instead of sim.inputs.model.load_model: the device image has no pydantic
    SimpleNamespace(**yaml.safe_load((model_specs_dir() / f"{name}.yaml").read_text()))
    for name in sys.argv[6:]
]
notes = []
frame = run_calibration(device, specs, quick=quick, dtype=dtype, time_budget_s=budget_s, notes=notes)
path = write_measurements(frame, f"{out_dir}/measurements-h200-{dtype}.csv")
print(f"wrote {len(frame)} rows to {path}")
print("\n".join(timed_shape_lines(frame) + notes))
graph = frame.dropna(subset=["time_graph_s"])
if len(graph):
    ratio = (graph["time_eager_s"] / graph["time_graph_s"]).astype(float)
    print(f"eager / graph time: median {ratio.median():.2f}, max {ratio.max():.2f} over {len(graph)} points")
summary = frame.groupby("op")["time_s"].agg(["count", "min", "median", "max"])
print((summary.assign(**{c: summary[c] * 1e6 for c in ("min", "median", "max")})).to_string())
print("(times in microseconds)")
PY
  echo "calibration $1 exit: ${PIPESTATUS[0]}"
}
run_dtype bf16 "$BF16_BUDGET_S"
run_dtype fp8 "$FP8_BUDGET_S"
