"""Rebuild the bundled measured GEMM grids and all-reduce tables (hwprofiles/tables/) from a named commit of
AIConfigurator.

    python -m calibrate.rebuild_aic_tables --git-dir /path/to/aiconfigurator/.git --commit 095f58a51c4c...

`--git-dir` is any clone or mirror of github.com/ai-dynamo/aiconfigurator (Apache-2.0); the tables
are read from the commit with `git show`, never from a work tree, so the bundled files depend on the
commit alone. Writes per profile one GEMM grid .npz (calibrate/import_aic.py) and one all-reduce .npz
(calibrate/import_aic_collectives.py), the licence text next to them, and PROVENANCE.md (commit, source
paths, sha256 and size of each file). The profiles' YAML points at the files (`calibration.tables.gemm_grid`,
`calibration.tables.allreduce`); this script does not edit the YAML.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import tempfile
from pathlib import Path

from calibrate.import_aic import AIC_DATA_DIR, AIC_GPU_OF, AIC_LICENSE, AIC_REPO, gemm_table_path, import_gemm_table
from calibrate.import_aic_collectives import import_allreduce_tables, write_allreduce_npz

TABLES_DIR = Path(__file__).resolve().parent.parent / "hwprofiles" / "tables"
# profile -> (engine, version) bundled: vLLM (the default engine preset), its newest version with a
# collected GEMM table for that GPU in the commit below. gb200-nvl72 takes b200's grid with the rest of
# its die's kernel ceilings (`die: b200`, sim/inputs/hardware.py), though AIConfigurator times GB200 apart.
BUNDLED = {"h100-sxm": ("vllm", "0.24.0"), "h200": ("vllm", "0.24.0"), "b200": ("vllm", "0.24.0"),
           "b300": ("vllm", "0.24.0"), "a100-80g-sxm": ("vllm", "0.14.0"),
           "l40s": ("vllm", "0.24.0"), "rtx-pro-6000": ("vllm", "0.24.0")}  # fmt: skip
# profile -> (nccl version, engine, engine version) of the all-reduce tables bundled: the newest NCCL
# collected for that GPU, and the vLLM version of its GEMM grid
BUNDLED_ALLREDUCE = {"h100-sxm": ("2.29.2", "vllm", "0.24.0"), "h200": ("2.29.2", "vllm", "0.24.0"),
                     "b200": ("2.29.2", "vllm", "0.24.0"), "b300": ("2.29.2", "vllm", "0.24.0"),
                     "a100-80g-sxm": ("2.27.3", "vllm", "0.14.0"), "l40s": ("2.27.3", "vllm", "0.22.0"),
                     "rtx-pro-6000": ("2.29.2", "vllm", "0.24.0")}  # fmt: skip
DEFAULT_COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"  # 2026-08-21


def _git(git_dir: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True).stdout


def extract_folder(git_dir: str, commit: str, folder: str, dest: Path) -> None:
    """Every file of `folder` at `commit` under `dest` (same relative paths)."""
    names = _git(git_dir, "ls-tree", "-r", "--name-only", commit, folder).decode().split()
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git(git_dir, "show", f"{commit}:{name}"))


def grid_file_name(engine: str, version: str) -> str:
    return f"aic-{engine}-{version}-gemm.npz"


def rebuild(git_dir: str, commit: str, profiles: list[str], out_dir: Path = TABLES_DIR) -> list[dict]:
    """Import each profile's table at `commit`; returns one record per file written."""
    commit = _git(git_dir, "rev-parse", commit).decode().strip()
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for profile in profiles:
            engine, version = BUNDLED[profile]
            gpu = AIC_GPU_OF[profile]
            extract_folder(git_dir, commit, f"{AIC_DATA_DIR}/{gpu}/gemm/{engine}", Path(tmp))
            table = gemm_table_path(Path(tmp) / AIC_DATA_DIR, gpu, engine, version)
            source_path = str(table.relative_to(tmp))
            meta = {"source": AIC_REPO, "license": AIC_LICENSE, "commit": commit, "path": source_path,
                    "engine": engine, "engine_version": version, "gpu": gpu}  # fmt: skip
            grid = import_gemm_table(table, meta)
            out = out_dir / profile / grid_file_name(engine, version)
            size = grid.write_npz(out)
            records.append({"profile": profile, "file": str(out.relative_to(out_dir)), "source": source_path,
                            "bytes": size, "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
                            "dtypes": sorted(grid.time_us), "skipped": grid.skipped_dtypes})
            if profile in BUNDLED_ALLREDUCE:
                records.append(_rebuild_allreduce(git_dir, commit, profile, Path(tmp), out_dir))
        (out_dir / "LICENSE.aiconfigurator-Apache-2.0").write_bytes(_git(git_dir, "show", f"{commit}:LICENSE"))
    write_provenance(out_dir, commit, records)
    return records


def _rebuild_allreduce(git_dir: str, commit: str, profile: str, tmp: Path, out_dir: Path) -> dict:
    """The profile's NCCL and custom all-reduce tables (calibrate/import_aic_collectives.py)."""
    nccl_version, engine, version = BUNDLED_ALLREDUCE[profile]
    gpu = AIC_GPU_OF[profile]
    nccl = f"{AIC_DATA_DIR}/{gpu}/comm/nccl/{nccl_version}/nccl_perf.parquet"
    custom = f"{AIC_DATA_DIR}/{gpu}/comm/{engine}/{version}/custom_allreduce_perf.parquet"
    for name in (nccl, custom):
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(_git(git_dir, "show", f"{commit}:{name}"))
    kinds = import_allreduce_tables(tmp / nccl, tmp / custom)
    meta = {"source": AIC_REPO, "license": AIC_LICENSE, "commit": commit, "nccl": nccl, "custom": custom}
    out = out_dir / profile / f"aic-nccl-{nccl_version}-{engine}-{version}-allreduce.npz"
    size = write_allreduce_npz(out, kinds, meta)
    return {"profile": profile, "file": str(out.relative_to(out_dir)), "source": f"{nccl}, {custom}", "bytes": size,
            "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
            "dtypes": [f"{kind} TP {', '.join(map(str, sorted(by_tp)))}" for kind, by_tp in kinds.items()],
            "skipped": {}}


def write_provenance(out_dir: Path, commit: str, records: list[dict]) -> None:
    lines = ["# Measured GEMM grids and all-reduce tables derived from AIConfigurator (Apache-2.0)", "",
             f"Source: {AIC_REPO}, commit {commit}, folder `{AIC_DATA_DIR}/`. Licence: Apache-2.0,",
             "Copyright NVIDIA CORPORATION & AFFILIATES; full text in `LICENSE.aiconfigurator-Apache-2.0`.",
             "Derived, not copied: each file keeps the rows of the dtypes the cost model prices (bf16, fp8,",
             "nvfp4) and the columns m, n, k, latency (ms -> us, float32) of one gemm_perf table, as an M x N x K",
             "grid (calibrate/import_aic.py); the all-reduce files keep the 16-bit all_reduce rows of one",
             "nccl_perf and one custom_allreduce_perf table (vLLM's CUDA-graph rows), elements -> bytes, ms -> us",
             "(calibrate/import_aic_collectives.py). Rebuild: `python -m calibrate.rebuild_aic_tables --git-dir GIT",
             f"--commit {commit}`.", "",
             "| file | source table(s) | dtypes / kinds | left out (rows) | bytes | sha256 |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(r["skipped"].items())) or "-"
        lines.append(f"| {r['file']} | {r['source']} | {', '.join(r['dtypes'])} | {skipped} | {r['bytes']} "
                     f"| {r['sha256']} |")
    (out_dir / "PROVENANCE.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="a clone or mirror of ai-dynamo/aiconfigurator")
    parser.add_argument("--commit", default=DEFAULT_COMMIT)
    parser.add_argument("--profiles", default=",".join(BUNDLED), help="comma-separated profile names")
    args = parser.parse_args()
    for r in rebuild(args.git_dir, args.commit, args.profiles.split(",")):
        print(f"{r['file']}: {r['bytes'] / 1e6:.2f} MB, {', '.join(r['dtypes'])} from {r['source']}")


if __name__ == "__main__":
    main()
