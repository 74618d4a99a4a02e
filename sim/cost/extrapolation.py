"""Why a run's costs are extrapolated: `summary.json`'s `extrapolating` list.

A reason is recorded when the profile has numbers marked guessed in its `sources` (or no
`sources` at all), when a GEMM shape of the model has no measured table (the smooth model
answers it), or when a tabled shape may run at M outside its measured range (M up to
max_num_batched_tokens for the layer GEMMs, max_num_seqs for the LM head), or when a shape answered
by the profile's measured grid lies outside it in N, K or M. An empty list means
every cost came from measured tables within range on a profile with no guessed numbers.
"""

from __future__ import annotations

from sim.cost.model import CostModel


def _guessed(cost: CostModel) -> list[str]:
    hw = cost.hw
    if not hw.sources:
        return [f"profile {hw.name}: no `sources`, so its numbers count as guessed"]
    guessed = sorted(key for key, value in hw.sources.items() if "guessed" in str(value))
    return [f"profile {hw.name}: guessed numbers ({', '.join(guessed)})"] if guessed else []


def extrapolation_reasons(cost: CostModel, max_tokens: int, max_seqs: int) -> list[str]:
    """Reasons (sentences) for one replica kind; [] when nothing is extrapolated."""
    reasons = _guessed(cost)
    m = cost.model
    shapes = [(name, n, k, max_tokens) for name, n, k in cost._gemm_shapes()]
    shapes.append(("lm_head", m.vocab_size // cost.tp, m.hidden_size, max_seqs))
    if m.moe is not None:
        reasons.append(f"{cost.model.name}: MoE expert GEMMs use the smooth model (no tables for them)")
    if m.n_layers_of("chunked"):
        reasons.append(f"{m.name}: chunked-local layers' attention is priced as a {m.window_tokens}-token sliding "
                       "window (an upper bound: a chunk holds between 1 and W tokens)")
    grid = cost.gemm_grid if cost.gemm_grid is not None and cost.gemm_grid.has(cost.weight_dtype) else None
    if not cost.tables and grid is None:
        reasons.append(f"profile {cost.hw.name}: no measured GEMM tables; the smooth model answers every GEMM")
        return reasons
    for name, n, k, m_max in shapes:
        table = cost.tables.get((int(n), int(k), int(cost.weight_bytes_el)))
        if table is None and grid is not None:
            reasons += _grid_reasons(grid, name, int(n), int(k), m_max)
            continue
        if table is None:
            reasons.append(f"{name} {n}x{k} (TP {cost.tp}): shape not measured; smooth model")
            continue
        if table.m_min > 1:
            reasons.append(f"{name} {n}x{k}: M below the measured {table.m_min:g} scaled by the smooth model")
        if m_max > table.m_max:
            reasons.append(f"{name} {n}x{k}: M up to {m_max} beyond the measured {table.m_max:g}; smooth-model ratio")
    return reasons


def _grid_reasons(grid, name: str, n: int, k: int, m_max: int) -> list[str]:
    """Where a shape answered by the measured grid (sim/cost/gemm_grid.py) leaves it."""
    out = []
    if not grid.inside_nk(n, k):
        out.append(f"{name} {n}x{k}: outside the measured GEMM grid (N {grid.n_out[0]:g}-{grid.n_out[-1]:g}, "
                   f"K {grid.k_in[0]:g}-{grid.k_in[-1]:g}); smooth-model ratio from its edge")
    if m_max > grid.m_tokens[-1]:
        out.append(f"{name} {n}x{k}: M up to {m_max} beyond the grid's {grid.m_tokens[-1]:g}; smooth-model ratio")
    return out
