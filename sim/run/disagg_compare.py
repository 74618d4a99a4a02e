"""Aggregated vs disaggregated at equal GPU count: the question "should I split prefill and
decode, and how many of each?" as a table, at a given load per replica (`infersim disagg`). Sizing
P:D layouts for a target rate under the plan's SLOs and cost is `sim.planner.disagg` (`plan --disagg`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sim.inputs.config import EngineConfig
from sim.inputs.feature_config import GroupKnobs
from sim.inputs.workload.trace import Trace
from sim.run.invoke import run


@dataclass(frozen=True)
class SplitResult:
    label: str
    n_gpus: int
    summary: dict

    def row(self) -> dict:
        s = self.summary
        goodput = s["goodput"]["request_throughput"] if s.get("goodput") else None
        transfer = s.get("kv_transfer_s") or {}
        return {
            "layout": self.label, "gpus": self.n_gpus, "finished": s["n_finished"],
            "ttft_p50_s": s["ttft_s"]["p50"], "ttft_p99_s": s["ttft_s"]["p99"],
            "tpot_p50_s": s["tpot_s"]["p50"], "tpot_p99_s": s["tpot_s"]["p99"],
            "goodput_req_s": goodput, "goodput_per_gpu": None if goodput is None else goodput / self.n_gpus,
            "slo_met": s["goodput"]["fraction"] if s.get("goodput") else None,
            "kv_transfer_p99_s": transfer.get("p99"),
        }


def compare_splits(base: EngineConfig, workload_for: Callable[[int], Trace],
                   ratios: list[tuple[int, int]]) -> list[SplitResult]:
    """For each (P, D): the disaggregated run, and the aggregated run of P + D replicas of the same
    layout (the same GPU count when the groups keep the run's layout; rows carry each one's GPUs),
    routed least_outstanding, both on `workload_for(P + D)` (scale the load with the cluster to
    compare per GPU). `base` holds model, hardware, layout, policy, SLOs and the groups' own knobs
    (`prefill`, `decode`: hardware, TP, EP / DP-attention layout, ...)."""
    results: list[SplitResult] = []
    done_aggregated: set[int] = set()
    for n_prefill, n_decode in ratios:
        n_replicas = n_prefill + n_decode
        workload = workload_for(n_replicas)
        if n_replicas not in done_aggregated:
            cfg = base.model_copy(update={"replicas": n_replicas, "router": "least_outstanding",
                                          # groups' knobs: P:D only
                                          "prefill": GroupKnobs(), "decode": GroupKnobs()})
            summary = run(cfg, workload).summary
            results.append(SplitResult(f"aggregated x{n_replicas}", n_replicas * base.layout().n_gpus, summary))
            done_aggregated.add(n_replicas)
        cfg = EngineConfig.model_validate({**base.model_dump(), "prefill_replicas": n_prefill,
                                           "decode_replicas": n_decode})
        summary = run(cfg, workload).summary
        results.append(SplitResult(f"{n_prefill}P:{n_decode}D", summary["disaggregation"]["n_gpus"], summary))
    return results
