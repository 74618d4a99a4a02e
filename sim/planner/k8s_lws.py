"""A replica wider than one node as a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, the Kubernetes SIG
project for multi-host inference): `replicas` groups of `size` pods, one pod per node, the leader (index 0)
serving the API. The pods run plan.json `launch.per_node` (sim/planner/launch_nodes.py), whose
`$(LWS_LEADER_ADDRESS)` / `$(LWS_WORKER_INDEX)` LeaderWorkerSet sets in every pod.

`restartPolicy: RecreateGroupOnPodRestart`: a replica's ranks cannot survive one of them restarting, so the
whole group is recreated. The spec's fields are the v1 API's (LeaderWorkerSetSpec: replicas,
leaderWorkerTemplate{size, restartPolicy, leaderTemplate, workerTemplate}); the pod templates are core
v1 PodTemplateSpecs (tests/test_k8s_emit.py validates them against the Kubernetes models).
"""

from __future__ import annotations

import shlex

from sim.planner.k8s_engines import pod_container, pod_spec

LWS_API = "leaderworkerset.x-k8s.io/v1"


def leader_worker_set(name: str, spec, per_node: dict, replicas: int, labels: dict, notes: dict) -> dict:
    gpus = per_node["gpus_per_node"]
    leader = pod_container(spec, *_serving(spec, per_node["leader"]), gpus, ready=True)
    worker = pod_container(spec, *_own(spec, per_node["worker"]), gpus, ready=False)
    template = {
        "size": per_node["nodes"], "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": {"metadata": {"labels": {**labels, "infersim/role": "leader"}}, "spec": pod_spec(leader)},
        "workerTemplate": {"metadata": {"labels": {**labels, "infersim/role": "worker"}}, "spec": pod_spec(worker)}}
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {**notes, "infersim/per-node": per_node["how"]}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": template}}


def _own(spec, node: dict) -> tuple[list[str], list[str]]:
    """A node's (command, args), the launch line's executable as the engine's image names it."""
    command = list(node["command"])
    if command[:1] != ["/bin/sh"]:
        command = list(spec.executable)
    return command, list(node["args"])


def _serving(spec, node: dict) -> tuple[list[str], list[str]]:
    """The leader's (command, args) with the engine's host / port flags (inside the shell line if it is one)."""
    command, args = _own(spec, node)
    if command[:1] == ["/bin/sh"]:
        return command, [args[0] + " " + shlex.join(spec.serve_args)]
    return command, [*args, *spec.serve_args]
