"""Time a model's projection GEMMs and grouped expert GEMMs (`kernels.arch_shapes`).

bf16/fp16/fp32 GEMMs run through `torch.nn.functional.linear`, fp8 through `torch._scaled_mm`
with M, K and N padded to 16 (`kernels.gemm.fp8_padded_kn`; the row keeps the real shape and
records the padded K and N it ran). Grouped expert GEMMs run as one `torch.bmm` over the
experts that receive rows (fp8: one `torch._scaled_mm` per expert, captured in one graph).
"""

from __future__ import annotations

from calibrate.run_state import RunState
from kernels import gemm
from kernels.arch_shapes import ExpertGroup, expert_groups, model_gemm_shapes
from kernels.shapes import GemmShape, ModelDims, shardable


def is_large(dims: ModelDims) -> bool:
    """MoE and MLA models: the grid's `large_model_*` axes apply to them."""
    return dims.moe is not None or dims.mla is not None


def _padding(run: RunState, n_out: int, k_in: int) -> dict:
    if run.dtype_name != "fp8":
        return {}
    n_run, k_run = gemm.fp8_padded_kn(n_out, k_in)
    return {} if (n_run, k_run) == (n_out, k_in) else {"n_out_padded": n_run, "k_in_padded": k_run}


def _gemm_points(models: list[ModelDims], run: RunState):
    """Distinct (tp, GemmShape, m_tokens) over the models; a shape two models share is timed once."""
    seen = set()
    for dims in models:
        for tp in run.grid.tps_for(is_large(dims)):
            if not shardable(dims, tp):
                continue
            for shape in model_gemm_shapes(dims, tp):
                for m_tokens in run.grid.m_tokens_for(is_large(dims)):
                    if (tp, shape, m_tokens) not in seen:
                        seen.add((tp, shape, m_tokens))
                        yield tp, shape, m_tokens


def _time_one_gemm(run: RunState, tp: int, shape: GemmShape, m_tokens: int) -> None:
    fp8 = run.dtype_name == "fp8"
    n, k = shape.n_out, shape.k_in
    if fp8:
        n_bytes = gemm.fp8_gemm_bytes(m_tokens, n, k)
    else:
        n_bytes = gemm.gemm_bytes(m_tokens, n, k, run.dtype)
    what = f"{shape.op} tp={tp} M={m_tokens} N={n} K={k}"
    if run.too_large(f"{shape.op} tp={tp} N={n} K={k}", n_bytes):
        return

    def make_inputs():
        if fp8:
            return gemm.make_fp8_gemm_inputs(m_tokens, n, k, run.device)
        return gemm.make_gemm_inputs(m_tokens, n, k, run.dtype, run.device)

    op = gemm.fp8_projection if fp8 else gemm.projection
    timing = run.measure(make_inputs, n_bytes, op, what)
    run.add(shape.op, timing, tp, m_tokens=m_tokens, n_out=n, k_in=k,
            kernel="torch_scaled_mm" if fp8 else "torch_linear", **_padding(run, n, k))  # fmt: skip


def time_gemms(run: RunState, models: list[ModelDims]) -> None:
    """One row per (TP, shape, M) of every model's plain GEMMs."""
    for tp, shape, m_tokens in _gemm_points(models, run):
        if not run.out_of_time():
            _time_one_gemm(run, tp, shape, m_tokens)


def _group_points(models: list[ModelDims], run: RunState):
    seen = set()
    for dims in models:
        for tp in run.grid.tps_for(is_large(dims)):
            if not shardable(dims, tp):
                continue
            for group in expert_groups(dims, tp):
                for m_tokens in run.grid.m_tokens_for(True):
                    n_active, rows = group.at(m_tokens)
                    key = (tp, group.op, group.n_out, group.k_in, n_active, rows)
                    if key not in seen:
                        seen.add(key)
                        yield tp, group, n_active, rows


def _time_one_group(run: RunState, tp: int, group: ExpertGroup, n_active: int, rows: int) -> None:
    n, k = group.n_out, group.k_in
    n_bytes = gemm.grouped_bytes(n_active, rows, n, k, run.dtype)
    what = f"{group.op} tp={tp} ep={group.ep} experts={n_active} rows={rows} N={n} K={k}"
    if run.too_large(what, n_bytes):
        return

    def make_inputs():
        return gemm.make_grouped_inputs(n_active, rows, n, k, run.dtype, run.device)

    timing = run.measure(make_inputs, n_bytes, gemm.grouped_projection, what)
    kernel = "scaled_mm_per_expert" if run.dtype_name == "fp8" else "torch_bmm"
    run.add(group.op, timing, tp, m_tokens=rows, n_out=n, k_in=k, n_experts=n_active, kernel=kernel,
            **_padding(run, n, k))  # fmt: skip


def time_expert_groups(run: RunState, models: list[ModelDims]) -> None:
    """One row per (TP, layout, grouped GEMM, experts with rows, rows each) of the MoE models.

    M tokens on the rank (the grid's M axis for MoE models) become `ExpertGroup.at(M)`;
    configurations two M values share (EP: all experts busy) are timed once."""
    for tp, group, n_active, rows in _group_points(models, run):
        if not run.out_of_time():
            _time_one_group(run, tp, group, n_active, rows)
