"""Rows of `simulate`'s facts table for the beyond-one-engine features (only those that ran)."""

from __future__ import annotations

from sim.run.attribution import PARTS


def feature_facts(summary: dict) -> list[list[str]]:
    facts = []
    spec = summary.get("spec_decoding")
    if spec:
        facts.append(["spec decoding", f"k={spec['spec_tokens']}, {spec['acceptance_rate']:.1%} of proposals "
                      f"accepted, {spec['tokens_per_step_drawn']:.2f} tokens/step drawn "
                      f"(expected {spec['tokens_per_step_expected']:.2f})"])
    if summary.get("prefix_hit_rate_host"):
        facts.append(["prefix hits by tier", f"GPU {summary['prefix_hit_rate_gpu']:.1%}, host "
                      f"{summary['prefix_hit_rate_host']:.1%}"])
    disagg = summary.get("disaggregation")
    if disagg:
        transfer = summary.get("kv_transfer_s") or {}
        p99 = transfer.get("p99")
        cost = disagg.get("cost_per_hour_usd")
        facts.append(["disaggregated", f"{disagg['prefill_replicas']}P ({disagg['prefill_hardware']} "
                      f"{group_label(disagg, 'prefill')}) : {disagg['decode_replicas']}D ({disagg['decode_hardware']} "
                      f"{group_label(disagg, 'decode')}), {disagg['n_gpus']} GPUs"
                      f"{'' if cost is None else f' (${cost:.2f}/hour)'}, link {disagg['link_kind']} "
                      f"{disagg['link_gb_s']:g} GB/s; KV transfer p99 "
                      f"{'-' if p99 is None else f'{p99 * 1e3:.1f} ms'}"])
    attribution = summary.get("latency_attribution")
    if attribution:
        for rank in ("p50", "p99"):
            parts = [(name, attribution[f"{rank}_{name}_s"]) for name in PARTS]
            shown = ", ".join(f"{name} {value * 1e3:.1f}" for name, value in parts if value > 0)
            facts.append([f"{rank} request (ms)", f"e2e {attribution[f'{rank}_e2e_s'] * 1e3:.1f} = {shown}"])
    return facts


def group_label(disagg: dict, role: str, plain_prefix: str = "TP") -> str:
    """`plain_prefix` + TP ('TP4'), or a group's EP / DP-attention layout: 'TP32 DP32 EP32 deepep normal'
    (SGLang's numbers)."""
    layout = disagg.get(f"{role}_layout") or {}
    if layout.get("n_kv_ranks", 1) == 1 and layout.get("ep", 1) == 1:
        return f"{plain_prefix}{disagg[f'{role}_tp']}"
    dp = f" DP{layout['dp']}" if layout["n_kv_ranks"] > 1 else ""
    return f"TP{disagg[f'{role}_tp']}{dp} EP{layout['ep']} {layout['moe_a2a']}"
