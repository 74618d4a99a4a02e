"""Which GPUs of which node each replica uses: summary.json `placement`.

Nodes are servers of `max_gpus_per_node` GPUs of one hardware profile (a GB200 NVL72 compute tray
holds 4; its NVLink domain, `scale_up_domain_gpus`, spans 18 trays), numbered per profile in the
order the replicas are listed (disaggregated: prefill replicas, then decode). A replica of n GPUs
(tp x pp, x dp for vLLM-style data parallelism; sim/inputs/layout/parallel.py) takes consecutive GPUs; one that
fits in a node never straddles two (it moves to the next node), a larger one takes whole nodes.
`nodes` (`--nodes`), when given, is how many nodes the cluster has: a layout needing more is
refused, spare GPUs are reported. Lists stop at `MAX_LISTED` entries (counts stay whole).
"""

from __future__ import annotations

from sim.errors import InputError
from sim.inputs.hardware import load_hardware
from sim.inputs.layout.config import group_layout

MAX_LISTED = 1024  # replicas / nodes listed in summary.json (a 100k-replica run would list megabytes)


def _replica_kinds(cfg) -> list[tuple[str, str, int]]:
    """(role, hardware, GPUs per replica) of every replica, in order (a disaggregated group's
    replica: its own layout's GPUs)."""
    if not cfg.is_disaggregated:
        return [("replica", hw, cfg.layout().n_gpus) for hw in cfg.hardware_of_replicas()]
    out = []
    for role, count, group in (("prefill", cfg.prefill_replicas, cfg.prefill), ("decode", cfg.decode_replicas,
                                                                                  cfg.decode)):
        out += [(role, group.hardware or cfg.hardware, group_layout(cfg, role).n_gpus)] * count
    return out


def _layout_row(layout) -> dict:
    return {"tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "ep": layout.expert_parallel_size,
            "enable_dp_attention": layout.enable_dp_attention}


def cluster_placement(cfg) -> dict:
    """{"nodes": [{"node", "hardware", "gpus_used"}...], "replicas": [{"replica", "role", "hardware",
    "n_gpus", "gpus": [[node, first GPU, GPUs on it], ...]}...], "n_nodes", "n_gpus", "n_gpus_idle"}."""
    next_free: dict[str, tuple[int, int]] = {}  # hardware -> (node index within it, next GPU on it)
    nodes: list[dict] = []
    node_ids: dict[tuple[str, int], int] = {}
    replicas = []
    for index, (role, hw_name, n_gpus) in enumerate(_replica_kinds(cfg)):
        per_node = load_hardware(hw_name).interconnect.max_gpus_per_node
        node, gpu = next_free.get(hw_name, (0, 0))
        if gpu and (n_gpus > per_node or gpu + n_gpus > per_node):
            node, gpu = node + 1, 0  # no straddling: a small replica moves on, a large one starts a node
        spans = []
        left = n_gpus
        while left:
            take = min(left, per_node - gpu)
            key = (hw_name, node)
            if key not in node_ids:
                node_ids[key] = len(nodes)
                nodes.append({"node": len(nodes), "hardware": hw_name, "gpus_used": 0})
            nodes[node_ids[key]]["gpus_used"] += take
            spans.append([node_ids[key], gpu, take])
            left -= take
            node, gpu = (node + 1, 0) if gpu + take == per_node else (node, gpu + take)
        next_free[hw_name] = (node, gpu)
        replicas.append({"replica": index, "role": role, "hardware": hw_name, "n_gpus": n_gpus, "gpus": spans})
    gpus_in_nodes = sum(load_hardware(n["hardware"]).interconnect.max_gpus_per_node for n in nodes)
    n_nodes = len(nodes)
    if cfg.nodes is not None:
        if cfg.nodes < n_nodes:
            raise InputError("--nodes", None, f"the replicas need {n_nodes} nodes "
                             f"({', '.join(sorted({n['hardware'] for n in nodes}))}); got {cfg.nodes}")
        spare = cfg.nodes - n_nodes
        gpus_in_nodes += spare * load_hardware(cfg.hardware).interconnect.max_gpus_per_node
        n_nodes = cfg.nodes
    n_used = sum(r["n_gpus"] for r in replicas)
    groups = {} if not cfg.is_disaggregated else {
        "group_layouts": {role: _layout_row(group_layout(cfg, role)) for role in ("prefill", "decode")}}
    return {"layout": _layout_row(cfg.layout()), **groups,
            "n_nodes": n_nodes, "n_gpus": n_used, "n_gpus_idle": gpus_in_nodes - n_used,
            "n_replicas": len(replicas), "nodes": nodes[:MAX_LISTED], "replicas": replicas[:MAX_LISTED]}
