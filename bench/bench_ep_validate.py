"""Expert-parallel / data-parallel-attention / pipeline-parallel validation rows: every multi-GPU row of the
TensorRT-LLM MoE perf-overview table, of its RTX PRO 6000 TP x PP tables and the SGLang large-scale-EP rows,
predicted and printed, then the median |error| per split, per file, per GPU (score half), of the PP rows
(pp > 1) and without the Maverick-on-H100 rows (docs/parallelism.md). About a minute.

    PYTHONPATH=$PWD python bench/bench_ep_validate.py
"""

from __future__ import annotations

import numpy as np

from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import predict

FILES = ("trtllm_perf_overview_moe_v1.0.csv", "sglang_large_scale_ep.csv", "trtllm_perf_overview_rtx_pro_6000.csv")


def main() -> None:
    files = [p for p in bundled_case_files() if p.name in FILES]
    rows = [(c, predict(c)) for c in load_cases(files) if c.tp * c.pp > 1]
    for c, p in rows:
        predicted = float("nan") if p.predicted is None else p.predicted
        error = float("nan") if p.error is None else p.error
        print(f"{c.case_id:55s} {c.split:5s} {c.value:10.2f} {predicted:10.2f} {error:+.3f} {p.reason[:60]}")

    def median(keep) -> str:
        errors = [abs(p.error) for c, p in rows if p.error is not None and keep(c)]
        return f"{len(errors)} rows, median |error| {np.median(errors):.1%}" if errors else "no rows"

    for split in ("fit", "score"):
        print(f"split={split}: {median(lambda c, s=split: c.split == s)}")
    for name in FILES:
        print(f"{name}: fit {median(lambda c, n=name: c.file.endswith(n) and c.split == 'fit')}; "
              f"score {median(lambda c, n=name: c.file.endswith(n) and c.split == 'score')}")
    n_pp = sum(c.pp > 1 for c, _ in rows)
    n_pp_na = sum(c.pp > 1 and p.predicted is None for c, p in rows)
    print(f"PP (pp > 1): {n_pp} rows, {n_pp_na} cannot express; fit {median(lambda c: c.pp > 1 and c.split == 'fit')}; "
          f"score {median(lambda c: c.pp > 1 and c.split == 'score')}")
    for gpu in ("b200", "h200", "h100", "rtx-pro-6000"):
        print(f"split=score {gpu}: {median(lambda c, g=gpu: c.split == 'score' and f'-{g}' in c.case_id)}")
    print(f"split=score without maverick-h100: "
          f"{median(lambda c: c.split == 'score' and 'maverick-h100' not in c.case_id)}")


if __name__ == "__main__":
    main()
