"""Packing the replicas of several models onto one hardware pool's nodes (`infersim pool plan`).

Two levels, first-fit decreasing at each (largest first, ties in model order, then replica index;
a deterministic heuristic, not a proof of the fewest nodes):
1. replicas that fit in a node share nodes (`max_gpus_per_node` GPUs: an HGX server, a GB200 tray);
   a larger replica takes whole nodes of its own (ceil(GPUs / node) of them, as `whole_nodes`);
2. nodes and multi-node replicas are packed into scale-up domains (`scale_up_gpus` // node nodes: an
   NVL72 rack holds 18 trays; on HGX a domain is its one node); a multi-node replica stays inside one
   domain when it fits in one (its TP all-reduce on NVLink), else takes whole domains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PoolReplica:
    model: str  # the pool entry's name
    index: int  # 0-based replica of that model
    gpus: int

    @property
    def label(self) -> str:
        return f"{self.model}#{self.index}"


def _first_fit(sizes: list[int], capacity: int) -> list[list[int]]:
    """Bins (lists of item indices) of first-fit decreasing; items no larger than `capacity`."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    bins: list[list[int]] = []
    free: list[int] = []
    for i in order:
        slot = next((b for b, room in enumerate(free) if room >= sizes[i]), None)
        if slot is None:
            bins.append([])
            free.append(capacity)
            slot = len(bins) - 1
        bins[slot].append(i)
        free[slot] -= sizes[i]
    return bins


def pack(replicas: list[PoolReplica], node_gpus: int, domain_gpus: int) -> dict:
    """pool.json's `packing`: every node with the replicas on it (and its domain), the counts."""
    domain_nodes = max(1, domain_gpus // node_gpus)
    small = [r for r in replicas if r.gpus <= node_gpus]
    nodes = [[small[i] for i in members] for members in _first_fit([r.gpus for r in small], node_gpus)]
    groups = [(members, 1) for members in nodes]  # (replicas, nodes it takes)
    groups += [([r], math.ceil(r.gpus / node_gpus)) for r in replicas if r.gpus > node_gpus]
    fitting = [g for g in groups if g[1] <= domain_nodes]
    domains = [[fitting[i] for i in members] for members in _first_fit([g[1] for g in fitting], domain_nodes)]
    rows, n_domains = [], 0
    for domain in domains:
        for members, width in domain:
            rows.append(_node_row(members, width, n_domains, node_gpus))
        n_domains += 1
    for members, width in (g for g in groups if g[1] > domain_nodes):  # wider than a domain: whole domains
        rows.append(_node_row(members, width, n_domains, node_gpus))
        n_domains += math.ceil(width / domain_nodes)
    n_nodes = sum(row["nodes"] for row in rows)
    return {"rule": "first-fit decreasing: replicas into nodes, nodes into scale-up domains (sim/planner/pool_pack.py)",
            "gpus_per_node": node_gpus, "gpus_per_domain": domain_nodes * node_gpus, "groups": rows,
            "n_nodes": n_nodes, "n_domains": n_domains, "gpus_used": sum(r.gpus for r in replicas),
            "gpus_in_nodes": n_nodes * node_gpus}


def _node_row(members: list[PoolReplica], width: int, domain: int, node_gpus: int) -> dict:
    used = sum(r.gpus for r in members)
    return {"domain": domain, "nodes": width, "replicas": [r.label for r in members], "gpus_used": used,
            "gpus_idle": width * node_gpus - used}


def separate_nodes(replicas: list[PoolReplica], node_gpus: int) -> int:
    """Nodes if each model were packed on nodes of its own (what pooling saves against)."""
    by_model: dict[str, list[PoolReplica]] = {}
    for r in replicas:
        by_model.setdefault(r.model, []).append(r)
    return sum(pack(group, node_gpus, node_gpus)["n_nodes"] for group in by_model.values())
