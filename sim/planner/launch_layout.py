"""A replica's parallel layout (sim/inputs/layout/parallel.py) as SGLang flags, and the multi-node facts both
engines' lines need.

SGLang (`python -m sglang.launch_server`, ServerArgs): `--tp-size` is the GPUs of one stage
(attention ranks x their TP under `--enable-dp-attention`), `--dp-size D --enable-dp-attention`
splits attention into D ranks of tp / D GPUs each with their own requests and KV, `--ep-size` the
GPUs the routed experts are sharded over, `--pp-size` pipeline stages, `--moe-a2a-backend deepep`
with `--deepep-mode`, `--enable-two-batch-overlap`; a replica over several nodes runs one command
per node with `--nnodes N --node-rank i --dist-init-addr HOST:PORT`. (`--tp 16 --dp 16` in
SGLang's docs are argparse abbreviations of `--tp-size` / `--dp-size`.)

vLLM's spelling of the same layout is in sim/planner/launch_vllm.py (`--tensor-parallel-size`
= attention TP, `--data-parallel-size`, `--enable-expert-parallel`, `--pipeline-parallel-size`).
"""

from __future__ import annotations

import math

from sim.inputs.hardware import load_hardware


def nodes_per_replica(cfg) -> int:
    """Nodes (servers of the profile's `max_gpus_per_node` GPUs) one replica spans."""
    return math.ceil(cfg.layout().n_gpus / load_hardware(cfg.hardware).interconnect.max_gpus_per_node)


def sglang_layout_args(cfg, missing: list[str]) -> list[str]:
    """SGLang's layout flags for one replica of `cfg`; appends what they cannot say to `missing`."""
    layout = cfg.layout()
    args = ["--tp-size", str(layout.n_gpus_per_stage)]
    if layout.n_kv_ranks > 1:
        args += ["--dp-size", str(layout.n_kv_ranks), "--enable-dp-attention"]
    if layout.uses_expert_parallel:
        args += ["--ep-size", str(layout.expert_parallel_size)]
    if layout.pp > 1:
        args += ["--pp-size", str(layout.pp)]
    if layout.uses_expert_parallel and cfg.moe_a2a_backend == "allgather_reducescatter":
        missing.append("MoE dispatch as an all-gather + reduce-scatter (allgather_reducescatter): SGLang has no "
                       "--moe-a2a-backend of that name")
    elif layout.uses_expert_parallel and cfg.moe_a2a_backend != "nccl":
        args += ["--moe-a2a-backend", cfg.moe_a2a_backend, "--deepep-mode", cfg.deepep_mode]
    if cfg.enable_two_batch_overlap:
        args.append("--enable-two-batch-overlap")
    if cfg.ep_num_redundant_experts:
        args += ["--ep-num-redundant-experts", str(cfg.ep_num_redundant_experts)]
    if cfg.moe_load_imbalance is not None:
        missing.append(f"expert load imbalance {cfg.moe_load_imbalance:g} (a property of the traffic; SGLang's "
                       "--enable-eplb rebalances it)")
    n_nodes = nodes_per_replica(cfg)
    if n_nodes > 1:
        args += ["--nnodes", str(n_nodes)]
        missing.append(f"the replica spans {n_nodes} nodes: run the command on each with --node-rank 0..{n_nodes - 1} "
                       "and the same --dist-init-addr HOST:PORT")
    return args


def vllm_multinode_note(cfg) -> str | None:
    """What a vLLM replica over several nodes needs beyond `vllm serve`'s layout flags, or None."""
    layout, n_nodes = cfg.layout(), nodes_per_replica(cfg)
    if n_nodes == 1:
        return None
    if layout.n_kv_ranks > 1 and layout.tp * layout.pp <= load_hardware(cfg.hardware).interconnect.max_gpus_per_node:
        per_node = layout.n_kv_ranks // n_nodes
        return (f"the replica spans {n_nodes} nodes: start it on each with --data-parallel-size-local {per_node} "
                "(the first node also --data-parallel-address / --data-parallel-rpc-port; the others --headless "
                "--data-parallel-start-rank)")
    return f"the replica spans {n_nodes} nodes: run it on a Ray cluster of them (--distributed-executor-backend ray)"
