"""AIConfigurator's measured GEMM tables as a profile's measured GEMM grid.

AIConfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0, NVIDIA) publishes per GPU, engine
and engine version the kernel times its collector measured, under
`aic-core/src/aiconfigurator_core/systems/data/<gpu>/gemm/<engine>/<version>/gemm_perf.parquet`:
one row per (gemm_dtype, m, n, k) with `latency` in **milliseconds** (columns framework, version,
device, op_name, kernel_source, gemm_dtype, m, n, k, latency), on a regular grid (74 M x 22 N x 22 K
per dtype in the tables read so far). A version folder holding only `reuse.yaml` takes another
version's table (`from_version`); the importer follows it.

Kept: the dtypes the cost model prices (bfloat16 -> bf16, fp8 -> fp8 per-tensor scaled, nvfp4 ->
nvfp4) and the columns m, n, k, latency; left out (listed in the result): other dtypes (fp8_block:
no weight dtype of ours names block-scaled FP8 yet). Repeated (m, n, k) rows of one kernel source
keep their median; several kernel sources of one dtype keep the fastest per point (the engine
picks among them). Points the source lacks are NaN in the grid (sim/cost/gemm_grid.py skips them).

The result is the .npz that `calibration.tables.gemm_grid.file` names: float32 microseconds.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import InputError
from sim.output import atomic_write
from sim.yamlio import read_mapping

AIC_REPO = "github.com/ai-dynamo/aiconfigurator"
AIC_LICENSE = "Apache-2.0"
AIC_DATA_DIR = "aic-core/src/aiconfigurator_core/systems/data"
DTYPE_OF_AIC = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "nvfp4"}
REQUIRED = ("gemm_dtype", "m", "n", "k", "latency")
# our profile name -> AIConfigurator's GPU folder
AIC_GPU_OF = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm",
              "gb200-nvl72": "gb200", "a100-80g-sxm": "a100_sxm", "l40s": "l40s",
              "rtx-pro-6000": "rtx_pro_6000_server"}  # fmt: skip


@dataclass
class ImportedGrid:
    """A converted table: axes, microseconds per dtype, and what was left out."""

    m_tokens: np.ndarray
    n_out: np.ndarray
    k_in: np.ndarray
    time_us: dict[str, np.ndarray]
    meta: dict
    skipped_dtypes: dict[str, int] = field(default_factory=dict)  # AIC dtype -> rows left out

    def write_npz(self, out: Path) -> int:
        """Write the grid (compressed) to `out`; returns its size in bytes."""
        out.parent.mkdir(parents=True, exist_ok=True)
        arrays = {f"time_us_{dtype}": grid.astype(np.float32) for dtype, grid in self.time_us.items()}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, m_tokens=self.m_tokens, n_out=self.n_out, k_in=self.k_in,
                            meta=np.array(json.dumps(self.meta, sort_keys=True)), **arrays)
        atomic_write(out, lambda tmp: Path(tmp).write_bytes(buffer.getvalue()))  # no half-written grid
        return out.stat().st_size


def gemm_table_path(data_dir: Path, gpu: str, engine: str, version: str) -> Path:
    """The gemm_perf table of a GPU x engine x version under AIConfigurator's `systems/data`
    folder, following a `reuse.yaml` (one hop) to the version whose table is reused."""
    folder = data_dir / AIC_GPU_OF.get(gpu, gpu) / "gemm" / engine / version
    table = folder / "gemm_perf.parquet"
    if table.is_file():
        return table
    reuse = folder / "reuse.yaml"
    if reuse.is_file():
        for entry in read_mapping(reuse).get("reuse") or []:
            if isinstance(entry, dict) and entry.get("table") == "gemm_perf" and entry.get("from_version"):
                donor = folder.parent / str(entry["from_version"]) / "gemm_perf.parquet"
                if donor.is_file():
                    return donor
    raise InputError(folder, None, "a folder with gemm_perf.parquet (or a reuse.yaml naming one) under "
                                   "AIConfigurator's systems/data/<gpu>/gemm/<engine>/<version>")


def read_gemm_rows(path: Path) -> pd.DataFrame:
    """The rows of a gemm_perf table (.parquet, or .csv with the same columns), checked."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputError(path, None, f"a gemm_perf .parquet or .csv ({exc})") from None
    for column in REQUIRED:
        if column not in frame.columns:
            raise InputError(path, column, f"a column of a gemm_perf table ({', '.join(REQUIRED)})")
    for column in ("m", "n", "k", "latency"):
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any() or (values <= 0).any() or not np.isfinite(values).all():
            raise InputError(path, column, "finite numbers > 0 on every row")
        frame[column] = values
    if frame.empty:
        raise InputError(path, None, "at least one row")
    return frame


def _fastest_per_point(rows: pd.DataFrame) -> pd.Series:
    """Milliseconds per (m, n, k): median of repeats within a kernel source, fastest across sources."""
    by = ["m", "n", "k"] + (["kernel_source"] if "kernel_source" in rows.columns else [])
    return rows.groupby(by)["latency"].median().groupby(level=[0, 1, 2]).min()


def convert_gemm_rows(frame: pd.DataFrame, meta: dict) -> ImportedGrid:
    """The kept dtypes of `frame` on one M x N x K grid (the union of their axes), microseconds."""
    kept = frame[frame["gemm_dtype"].isin(DTYPE_OF_AIC)]
    skipped = frame.loc[~frame["gemm_dtype"].isin(DTYPE_OF_AIC), "gemm_dtype"].value_counts().to_dict()
    if kept.empty:
        raise InputError(meta.get("path", "gemm table"), "gemm_dtype",
                         f"rows of at least one of {', '.join(DTYPE_OF_AIC)}")
    axes = [np.unique(kept[c].to_numpy(np.int64)) for c in ("m", "n", "k")]
    time_us, kernels = {}, {}
    for aic_dtype, rows in kept.groupby("gemm_dtype"):
        ms = _fastest_per_point(rows)
        grid = np.full(tuple(a.size for a in axes), np.nan)
        idx = [np.searchsorted(axis, ms.index.get_level_values(i)) for i, axis in enumerate(axes)]
        grid[idx[0], idx[1], idx[2]] = ms.to_numpy() * 1e3  # ms -> us
        time_us[DTYPE_OF_AIC[aic_dtype]] = grid
        if "kernel_source" in rows.columns:
            kernels[DTYPE_OF_AIC[aic_dtype]] = sorted(rows["kernel_source"].astype(str).unique())
    meta = {**meta, "kernel_source": kernels, "units": "time_us float32, NaN = not measured"}
    return ImportedGrid(*axes, time_us, meta, {str(k): int(v) for k, v in skipped.items()})


def import_gemm_table(path: Path, meta: dict) -> ImportedGrid:
    """Read and convert one gemm_perf table; `meta` records where it came from."""
    frame = read_gemm_rows(path)
    for column in ("framework", "version", "device"):
        if column in frame.columns and column not in meta:
            meta = {**meta, column: str(frame[column].iloc[0])}
    return convert_gemm_rows(frame, meta)


def grid_summary(grid: ImportedGrid) -> list[list[str]]:
    """Rows for a table: dtype, measured points, missing points, M / N / K range."""
    span = (f"M {grid.m_tokens[0]}-{grid.m_tokens[-1]}, N {grid.n_out[0]}-{grid.n_out[-1]}, "
            f"K {grid.k_in[0]}-{grid.k_in[-1]}")
    return [[dtype, str(int(np.isfinite(t).sum())), str(int(np.isnan(t).sum())), span]
            for dtype, t in grid.time_us.items()]
