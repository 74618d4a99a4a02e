"""Why a run's costs are extrapolated: `summary.json`'s `extrapolating` list.

A reason is recorded when the profile has numbers marked guessed in its `sources` (or no
`sources` at all), when a GEMM shape of the model has no measured table (the smooth model
answers it), or when a tabled shape may run at M outside its measured range (M up to
max_num_batched_tokens for the layer GEMMs, max_num_seqs for the LM head). An empty list means
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
    if not cost.tables:
        reasons.append(f"profile {cost.hw.name}: no measured GEMM tables; the smooth model answers every GEMM")
        return reasons
    for name, n, k, m_max in shapes:
        table = cost.tables.get((int(n), int(k), int(cost.weight_bytes_el)))
        if table is None:
            reasons.append(f"{name} {n}x{k} (TP {cost.tp}): shape not measured; smooth model")
            continue
        if table.m_min > 1:
            reasons.append(f"{name} {n}x{k}: M below the measured {table.m_min:g} scaled by the smooth model")
        if m_max > table.m_max:
            reasons.append(f"{name} {n}x{k}: M up to {m_max} beyond the measured {table.m_max:g}; smooth-model ratio")
    return reasons
