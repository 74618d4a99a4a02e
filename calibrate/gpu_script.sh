#!/usr/bin/env bash
# One-shot H200 calibration run, for a session that is lent a GPU machine.
#
# STATUS: UNTESTED ON A GPU. Written and checked only on CPU (the runner's quick CPU grid
# and the Triton kernel in Triton's interpreter). Expect to fix small things on first use.
#
# Usage (from the repository root, on the device machine, whose image has torch, triton,
# pandas, numpy and pyyaml but not pydantic, so model specs are read as plain YAML here):
#     OUT=/some/dir bash calibrate/gpu_script.sh [TIME_BUDGET_S]
# Writes under $OUT:
#     env.txt                       nvidia-smi, torch/triton versions
#     selfcheck-fp32.json, -bf16    paged decode (torch reference + Triton) vs dense attention
#     measurements-h200-bf16.csv    the full grid (calibrate.grid.full_grid) for
#                                   llama-3-8b and llama-2-7b in bf16
#     run.log                       the runner's log (points timed, points skipped)
# Budget: about 8 minutes in all. The runner stops starting new points after
# TIME_BUDGET_S (default 360 s) and the whole python step is killed at 450 s.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
TIME_BUDGET_S="${1:-360}"
PYTHON="${PYTHON:-python3}"

{
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
  "$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# Correctness before timing: a kernel that is wrong is not worth timing.
for dtype in fp32 bf16; do
  timeout 120 "$PYTHON" -m kernels.selfcheck --device cuda --dtype "$dtype" \
    > "$OUT/selfcheck-$dtype.json" 2>&1
  echo "selfcheck $dtype: exit $? $(head -c 600 "$OUT/selfcheck-$dtype.json")"
done

timeout 450 "$PYTHON" - "$OUT" "$TIME_BUDGET_S" <<'EOF' 2>&1 | tee "$OUT/run.log"
import logging
import sys
from types import SimpleNamespace

import yaml

from calibrate.runner import run_calibration, write_measurements
from sim.paths import model_specs_dir

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
out_dir, budget_s = sys.argv[1], float(sys.argv[2])
# Plain YAML instead of sim.model.load_model: the device image has no pydantic.
specs = [
    SimpleNamespace(**yaml.safe_load((model_specs_dir() / f"{name}.yaml").read_text()))
    for name in ("llama-3-8b", "llama-2-7b")
]
frame = run_calibration("cuda", specs, quick=False, dtype="bf16", time_budget_s=budget_s)
path = write_measurements(frame, f"{out_dir}/measurements-h200-bf16.csv")
print(f"wrote {len(frame)} rows to {path}")
summary = frame.groupby("op")["time_s"].agg(["count", "min", "median", "max"])
print((summary.assign(**{c: summary[c] * 1e6 for c in ("min", "median", "max")})).to_string())
print("(times in microseconds)")
EOF
echo "calibration exit: ${PIPESTATUS[0]}"
