"""Launch lines of a disaggregated cluster's two groups: one server command per group replica, each
with its own layout (sim.planner.launch.layout_lines), plus each engine's prefill/decode wiring.

SGLang: `--disaggregation-mode prefill|decode` on each server (docs.sglang.io, "PD Disaggregation";
KV moves over its transfer engine, Mooncake by default, `--disaggregation-transfer-backend nixl`
the other), and `python -m sglang_router.launch_router --pd-disaggregation --prefill URL --decode
URL` in front. vLLM: every server takes `--kv-transfer-config` with the NIXL connector
(docs.vllm.ai, "NixlConnector Usage Guide": `kv_role` `kv_both`); vLLM has no flag that makes a
server a prefill or a decode one: the proxy in front decides (it sends a request to a prefill
server first, then to a decode server with the transfer's parameters).
"""

from __future__ import annotations

import json
import shlex

from sim.planner.launch import layout_lines
from sim.planner.launch_nodes import per_node_commands

VLLM_KV_TRANSFER_CONFIG = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def group_launch_lines(groups: dict, model_id: str | None = None) -> dict:
    """plan.json `disaggregated.launch`: per role ("prefill", "decode": the group's config,
    sim.engine.disagg.build.group_config), the vLLM and SGLang commands of one of its replicas, each with
    what it cannot express, its GPUs and its per-node commands when a replica spans nodes
    (sim.planner.launch_nodes); and the router each engine puts in front. `model_id`: the checkpoint
    served (plan --model-id; default the model spec's)."""
    out = {}
    for role, cfg in groups.items():
        lines = layout_lines(cfg, 1, model_id)
        sglang, vllm = lines["sglang"], lines["vllm"]
        sglang["command"] += " " + shlex.join(["--disaggregation-mode", role])
        sglang["not_expressible"] = [*sglang["not_expressible"], "the KV transfer engine (SGLang's default "
                                     "Mooncake, or --disaggregation-transfer-backend nixl) is priced as the profiles' "
                                     "GPU link or NIC, not per engine"]
        vllm["command"] += " " + shlex.join(["--kv-transfer-config", json.dumps(VLLM_KV_TRANSFER_CONFIG,
                                                                               separators=(",", ":"))])
        vllm["not_expressible"] = [*vllm["not_expressible"], f"the {role} role: vLLM has no flag for it; the proxy "
                                   "in front sends each request to a prefill server, then to a decode server"]
        for engine, line in lines.items():  # what `plan --emit k8s` runs (sim/planner/k8s_disagg.py)
            line["gpus_per_replica"] = cfg.layout().n_gpus
            line["per_node"] = per_node_commands(cfg, engine, shlex.split(line["command"]))
        out[role] = lines
    out["router"] = {
        "sglang": "python -m sglang_router.launch_router --pd-disaggregation --prefill http://PREFILL:PORT "
                  "--decode http://DECODE:PORT (one --prefill / --decode per server)",
        "vllm": "a P/D-aware proxy (llm-d's P/D scheduler, or vLLM's disaggregated-serving proxy example)"}
    return out
