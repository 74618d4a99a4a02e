#!/usr/bin/env bash
# One-shot H200 calibration run, for a session that is lent a GPU machine.
#
# STATUS: NEVER RAN ON A GPU (issue 6 and issue 10 sessions were not lent one at the time).
# Checked on CPU with `DEVICE=cpu QUICK=1 OUT=/tmp/x bash calibrate/gpu_script.sh` (toy model).
#
# Usage (repository root, on the device machine, whose image has torch, triton, pandas, numpy and
# pyyaml but not pydantic, so model specs are read as plain YAML here):
#     OUT=/some/dir bash calibrate/gpu_script.sh
# Writes under $OUT (6 files):
#     env.txt                     nvidia-smi, torch/triton versions, date (provenance of the CSVs)
#     selfcheck-bf16.json         paged decode (torch reference + Triton) vs dense attention
#     measurements-h200-bf16.csv  bf16 GEMMs of Llama-3-8B, Llama-3-70B, Mixtral-8x7B (TP 1/2/4/8
#                                 shards, M 1..16384), prefill attention (SDPA) up to 16k tokens,
#                                 paged decode attention per block size and context
#     measurements-h200-fp8.csv   fp8 GEMMs (torch._scaled_mm) at the same shapes
#     run-bf16.log, run-fp8.log   the runner's logs (points timed, points skipped)
# Budget: bf16 stops starting points after BF16_BUDGET_S (200 s), fp8 after FP8_BUDGET_S (100 s);
# each python step is killed 60 s after its budget. Whole script: about 7 minutes at most.
# Then, here: calibrate fit measurements-h200-*.csv --base h200 --out hwprofiles/h200-calibrated.yaml
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-python3}"
DEVICE="${DEVICE:-cuda}"
QUICK="${QUICK:-0}"
BF16_BUDGET_S="${BF16_BUDGET_S:-200}"
FP8_BUDGET_S="${FP8_BUDGET_S:-100}"

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv 2>&1 || true
  "$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# Correctness before timing: a kernel that is wrong is not worth timing.
timeout 90 "$PYTHON" -m kernels.selfcheck --device "$DEVICE" --dtype bf16 > "$OUT/selfcheck-bf16.json" 2>&1
echo "selfcheck bf16: exit $? $(head -c 400 "$OUT/selfcheck-bf16.json")"

run_dtype() {  # $1 dtype, $2 budget seconds
  timeout $(( $2 + 60 )) "$PYTHON" - "$OUT" "$1" "$2" "$DEVICE" "$QUICK" <<'PY' 2>&1 | tee "$OUT/run-$1.log"
import logging
import sys
from types import SimpleNamespace

import yaml

from calibrate.runner import run_calibration, write_measurements
from sim.paths import model_specs_dir

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
out_dir, dtype, budget_s, device, quick = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
specs = [  # plain YAML instead of sim.inputs.model.load_model: the device image has no pydantic
    SimpleNamespace(**yaml.safe_load((model_specs_dir() / f"{name}.yaml").read_text()))
    for name in ("llama-3-8b", "llama-3-70b", "mixtral-8x7b")
]
frame = run_calibration(device, specs, quick=quick, dtype=dtype, time_budget_s=budget_s)
path = write_measurements(frame, f"{out_dir}/measurements-h200-{dtype}.csv")
print(f"wrote {len(frame)} rows to {path}")
summary = frame.groupby("op")["time_s"].agg(["count", "min", "median", "max"])
print((summary.assign(**{c: summary[c] * 1e6 for c in ("min", "median", "max")})).to_string())
print("(times in microseconds)")
PY
  echo "calibration $1 exit: ${PIPESTATUS[0]}"
}
run_dtype bf16 "$BF16_BUDGET_S"
run_dtype fp8 "$FP8_BUDGET_S"
