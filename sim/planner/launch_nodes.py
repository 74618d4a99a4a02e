"""The commands of a replica wider than one node: what its first node (the leader) and every other node
(the workers) run, with the leader's address and each node's index left as the LeaderWorkerSet
environment variables `LWS_LEADER_ADDRESS` and `LWS_WORKER_INDEX` (the leader is index 0), which
Kubernetes expands in `$(NAME)` form in a container's command and args. plan.json `launch.per_node`;
sim/planner/k8s_lws.py wraps it in a LeaderWorkerSet.

- SGLang: the same `sglang.launch_server` line on every node with `--nnodes N` (already in the line),
  `--node-rank i` and `--dist-init-addr LEADER:PORT` (docs.sglang.io, "Multi-Node Deployment").
- vLLM, data-parallel ranks spread over the nodes (each rank within a node): every node runs
  `--data-parallel-size-local dp/N`; the leader serves the API with `--data-parallel-address` and
  `--data-parallel-rpc-port`, the workers run `--headless` from `--data-parallel-start-rank i x dp/N`
  (vLLM's data-parallel deployment docs). A shell computes the start rank.
- vLLM otherwise (one TP x PP group over the nodes): a Ray cluster, the leader its head; the workers
  join it and the leader starts `vllm serve ... --distributed-executor-backend ray` once all N nodes
  are in (vLLM's multi-node serving docs).
- TensorRT-LLM and LMDeploy: not written (their multi-node launchers are MPI jobs); `refused` says so.
"""

from __future__ import annotations

import shlex

from sim.planner.launch_layout import nodes_per_replica

LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"  # set by LeaderWorkerSet in every pod of a group
NODE_INDEX = "$(LWS_WORKER_INDEX)"  # 0 on the leader
SGLANG_DIST_PORT = 20000  # the port SGLang's docs use for --dist-init-addr
VLLM_DP_RPC_PORT = 13345  # vLLM's --data-parallel-rpc-port default
RAY_PORT = 6379  # Ray's default GCS port


def per_node_commands(cfg, engine: str, argv: list[str]) -> dict | None:
    """`launch.per_node` of a replica of `cfg` spanning several nodes, from its one-line `argv` for
    `engine`: {nodes, gpus_per_node, leader: {command, args}, worker: {command, args}, how}, or
    {nodes, refused} where the engine's multi-node launch is not written; None within one node."""
    n_nodes = nodes_per_replica(cfg)
    if n_nodes == 1:
        return None
    gpus = cfg.layout().n_gpus // n_nodes
    base = {"nodes": n_nodes, "gpus_per_node": gpus}
    if engine == "sglang":
        return {**base, **_sglang(argv)}
    if engine == "vllm":
        layout = cfg.layout()
        if layout.n_kv_ranks % n_nodes == 0 and layout.attention_tp * layout.pp <= gpus:
            return {**base, **_vllm_data_parallel(argv, layout.n_kv_ranks // n_nodes)}
        return {**base, **_vllm_ray(argv, n_nodes)}
    return {**base, "refused": f"{engine} over {n_nodes} nodes is an MPI job (its own launcher); infersim writes "
                               "multi-node manifests for vLLM and SGLang"}


def _sglang(argv: list[str]) -> dict:
    node_args = ["--node-rank", NODE_INDEX, "--dist-init-addr", f"{LEADER_ADDRESS}:{SGLANG_DIST_PORT}"]
    exe, args = argv[:3], argv[3:] + node_args
    return {"leader": {"command": exe, "args": args}, "worker": {"command": exe, "args": args},
            "how": f"every node runs the line with --node-rank (its LeaderWorkerSet index) and --dist-init-addr "
                   f"the leader's address:{SGLANG_DIST_PORT}; the leader serves the API"}


def _vllm_data_parallel(argv: list[str], ranks_per_node: int) -> dict:
    exe, args = argv[:2], argv[2:]
    local = ["--data-parallel-size-local", str(ranks_per_node), "--data-parallel-rpc-port", str(VLLM_DP_RPC_PORT)]
    worker = (shlex.join([*argv, *local, "--headless"]) + ' --data-parallel-address "$LWS_LEADER_ADDRESS"'
              f" --data-parallel-start-rank $((LWS_WORKER_INDEX * {ranks_per_node}))")
    return {"leader": {"command": exe, "args": [*args, *local, "--data-parallel-address", LEADER_ADDRESS]},
            "worker": {"command": ["/bin/sh", "-c"], "args": [worker]},
            "how": f"{ranks_per_node} data-parallel ranks per node: the leader serves the API, the workers run "
                   "headless from their first rank"}


def _vllm_ray(argv: list[str], n_nodes: int) -> dict:
    alive = ("python3 -c 'import ray; ray.init(address=\"auto\"); "
             "print(sum(n[\"Alive\"] for n in ray.nodes()))'")
    leader = (f'ray start --head --port={RAY_PORT} && until [ "$({alive})" -ge {n_nodes} ]; do sleep 5; done && exec '
              + shlex.join([*argv, "--distributed-executor-backend", "ray"]))
    worker = f'ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --block'
    return {"leader": {"command": ["/bin/sh", "-c"], "args": [leader]},
            "worker": {"command": ["/bin/sh", "-c"], "args": [worker]},
            "how": f"a Ray cluster of the {n_nodes} nodes, the leader its head; vllm serve starts on the leader "
                   "once every node has joined"}
