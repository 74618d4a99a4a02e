"""`plan --emit k8s`: the recommended cluster as Kubernetes manifests (k8s.yaml in the plan folder), for the
engine the plan simulated (vLLM, SGLang, TensorRT-LLM: sim/planner/k8s_engines.py), headed by the
`# infersim simulated: <engine> <version>` line.

Three objects:
- the replicas: a Deployment (apps/v1) of `replicas` pods when one replica fits a node, each running the
  plan's launch line (its flags as `args`, `command` set explicitly so the image's entrypoint does not
  matter) on the replica's GPUs (`nvidia.com/gpu`, the NVIDIA device plugin's resource), with /dev/shm
  for the workers and a readiness probe on the server's /health; a replica wider than a node is a
  LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, sim/planner/k8s_lws.py): one group of pods per replica,
  one pod per node, running the per-node commands of plan.json `launch.per_node`;
- a Service in front of the serving pods: the round-robin load balancer the plan assumed when its router
  is round_robin; other routers are named in the launch's `not_expressible` and an annotation here;
- a HorizontalPodAutoscaler on the metric the plan sized by: requests per second per replica, kept at the
  plan's operating point (target rate / replicas), between the planned replicas and twice as many.
  Kubernetes has no such metric by itself: for vLLM the annotation gives the Prometheus adapter rule that
  derives it from `vllm:request_success_total`; for the others, derive it from the engine's request counter.
Where plan.json `disaggregated` names a P:D layout cheapest, the manifests are its prefill and decode
workloads instead (sim/planner/k8s_disagg.py).
Derived from the simulation, not deployed anywhere: the labels and annotations say so. What cannot be
written (an LMDeploy plan, TensorRT-LLM over several nodes) is an InputError raised after plan.json and
the plots are written (sim/cli/plan.py).
"""

from __future__ import annotations

import math
import shlex

import yaml

RATE_METRIC = "requests_per_second"
ADAPTER_RULE = ('seriesQuery: vllm:request_success_total; as: requests_per_second; metricsQuery: '
                'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)')


def manifests(plan: dict, name: str = "infersim-plan") -> list[dict]:
    """[Deployment or LeaderWorkerSet, Service, HorizontalPodAutoscaler] for plan.json's recommendation
    and launch; InputError where the engine's manifests are not written."""
    from sim.errors import InputError
    from sim.planner.k8s_disagg import chosen_split, disaggregated_manifests
    from sim.planner.k8s_engines import engine_container, pod_container, split_line
    from sim.planner.k8s_lws import leader_worker_set

    best, launch = plan["recommended"], plan["launch"]
    if best is None or launch is None:
        raise ValueError("the plan has no recommendation to deploy")
    engine = line_engine(launch)
    check_k8s_engine(engine)
    if chosen_split(plan) is not None:  # a P:D layout verified cheapest: llm-d-style prefill / decode workloads
        return disaggregated_manifests(plan, engine, name)
    spec = engine_container(engine)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "infersim"}
    notes = {"infersim/derived-from": launch["label"], "infersim/hardware": best["hardware"],
             "infersim/router-assumed": launch["router"],
             "infersim/image": f"{spec.image}: pin the tag to the simulated version"}
    if launch.get("simulated"):
        notes["infersim/simulated"] = launch["simulated"].removeprefix("# infersim simulated: ")
    if launch.get("not_expressible"):
        notes["infersim/not-expressible"] = " | ".join(launch["not_expressible"])
    per_node = launch.get("per_node")
    if per_node is not None:
        if "refused" in per_node:
            raise InputError("--emit", "k8s", per_node["refused"])
        workload = leader_worker_set(name, spec, per_node, best["replicas"], labels, notes)
        serving = {"app.kubernetes.io/name": name, "infersim/role": "leader"}
    else:
        command, args = split_line(engine, shlex.split(launch["command"]))
        container = pod_container(spec, command, [*args, *spec.serve_args], best.get("gpus_per_replica", best["tp"]),
                                  ready=True)
        workload = _deployment(name, container, best, labels, notes)
        serving = {"app.kubernetes.io/name": name}
    return [workload, _service(name, spec, serving, labels, notes),
            _autoscaler(name, plan, best, labels, workload, engine)]


def line_engine(launch: dict) -> str:
    """The engine whose command plan.json's launch line is (`vllm` for a preset without a line of its own)."""
    from sim.planner.launch import SERVERS

    return next(engine for engine, server in SERVERS.items() if server == launch["server"])


def check_k8s_engine(engine: str) -> None:
    """InputError when the manifests of `engine`'s line are not written (LMDeploy): before planning from
    the CLI, so nothing is lost."""
    from sim.planner.k8s_engines import CONTAINERS

    if engine not in CONTAINERS:
        from sim.errors import InputError

        raise InputError("--emit", "k8s", f"writes manifests for vLLM, SGLang and TensorRT-LLM lines; the plan's "
                                          f"engine is {engine}: drop --emit k8s (plan.json holds its launch line)")


def _deployment(name: str, container: dict, best: dict, labels: dict, notes: dict) -> dict:
    from sim.planner.k8s_engines import pod_spec

    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels, "annotations": notes},
            "spec": {"replicas": best["replicas"], "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec(container)}}}


def _service(name: str, spec, selector: dict, labels: dict, notes: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": labels, "annotations": {"infersim/router-assumed":
                                                                         notes["infersim/router-assumed"]}},
            "spec": {"selector": selector, "ports": [{"name": "http", "port": spec.port, "targetPort": spec.port}]}}


def _autoscaler(name: str, plan: dict, best: dict, labels: dict, workload: dict, engine: str) -> dict:
    per_replica_qps = plan["target_qps"] / best["replicas"]
    rule = (ADAPTER_RULE if engine == "vllm"
            else f"derive {RATE_METRIC} from the {engine} server's finished-requests counter")
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"infersim/metric": f"requests/s per replica; the plan verified "
                                                            f"{per_replica_qps:.4g} req/s per replica within the SLOs",
                                         "infersim/prometheus-adapter-rule": rule}},
            "spec": {"scaleTargetRef": {"apiVersion": workload["apiVersion"], "kind": workload["kind"], "name": name},
                     "minReplicas": best["replicas"], "maxReplicas": 2 * best["replicas"],
                     "metrics": [{"type": "Pods", "pods": {
                         "metric": {"name": RATE_METRIC},
                         "target": {"type": "AverageValue", "averageValue": _quantity(per_replica_qps)}}}]}}


def _quantity(value: float) -> str:
    """A Kubernetes quantity in milli-units, rounded down (scale out before the verified rate)."""
    return f"{max(1, math.floor(value * 1000))}m"


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # repeated label maps written out, not as &id anchors
        return True


def manifests_yaml(plan: dict) -> str:
    """The manifests as one YAML stream, headed by the launch's `# infersim simulated: <engine> <version>` line
    (and, for a disaggregated plan, the line saying which P:D layout they deploy)."""
    from sim.planner.k8s_disagg import chosen_split

    header = plan["launch"].get("simulated")
    body = yaml.dump_all(manifests(plan), Dumper=_NoAliases, sort_keys=False)
    if chosen_split(plan) is not None:
        header = f"{header}\n# infersim disaggregated: {plan['disaggregated']['verdict']}"
    return f"{header}\n{body}" if header else body
