"""`plan --emit k8s`: the recommended cluster as Kubernetes manifests (k8s.yaml in the plan folder).

Three objects, plain Kubernetes API types (apps/v1, v1, autoscaling/v2), for vLLM:
- a Deployment of `replicas` pods, each running the plan's `vllm serve` line (its flags as `args`,
  `command` set explicitly so the image's entrypoint does not matter) on `tp` GPUs
  (`nvidia.com/gpu`, the NVIDIA device plugin's resource), with /dev/shm for the TP workers and a
  readiness probe on vLLM's /health;
- a Service in front of the pods (port 8000, vLLM's default): the round-robin load balancer the
  plan assumed when its router is round_robin; other routers are named in the launch's
  `not_expressible` and an annotation here;
- a HorizontalPodAutoscaler on the metric the plan sized by: requests per second per replica,
  kept at the plan's operating point (target rate / replicas), between the planned replicas and
  twice as many. Kubernetes has no such metric by itself: the annotation gives the Prometheus
  adapter rule that derives it from vLLM's `vllm:request_success_total` counter.
Derived from the simulation, not deployed anywhere: the labels and annotations say so.
"""

from __future__ import annotations

import math
import shlex

import yaml

VLLM_PORT = 8000  # vllm serve --port default
IMAGE = "vllm/vllm-openai:latest"
GPU_RESOURCE = "nvidia.com/gpu"
RATE_METRIC = "vllm_requests_per_second"
ADAPTER_RULE = ('seriesQuery: vllm:request_success_total; as: vllm_requests_per_second; metricsQuery: '
                'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)')


K8S_ENGINES = ("vllm",)  # engines whose launch line the manifests run (`vllm serve`)


def check_k8s_engine(engine: str) -> None:
    """InputError before any planning when `--emit k8s` cannot write the plan's engine."""
    if engine not in K8S_ENGINES:
        from sim.errors import InputError

        raise InputError("--emit", "k8s", f"writes vLLM manifests (`vllm serve` pods); the plan's engine is "
                                          f"{engine}: plan with --engine vllm, or drop --emit k8s (plan.json "
                                          "holds the engine's own launch line)")


def manifests(plan: dict, name: str = "infersim-plan", image: str = IMAGE) -> list[dict]:
    """[Deployment, Service, HorizontalPodAutoscaler] for plan.json's recommendation and launch."""
    best, launch = plan["recommended"], plan["launch"]
    if best is None or launch is None:
        raise ValueError("the plan has no recommendation to deploy")
    argv = shlex.split(launch["command"])
    if argv[:2] != ["vllm", "serve"]:
        check_k8s_engine(launch["engine"])
    replica_gpus, node_gpus = best.get("gpus_per_replica", best["tp"]), best.get("gpus_per_node", best["tp"])
    if replica_gpus > node_gpus:
        from sim.errors import InputError

        raise InputError("--emit", "k8s", f"the recommended replica ({replica_gpus} GPUs) spans nodes of "
                         f"{node_gpus}; a Deployment's pod runs on one node (a multi-node replica needs e.g. a "
                         "LeaderWorkerSet); nothing written: rerun without --emit k8s")
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "infersim"}
    notes = {"infersim/derived-from": launch["label"], "infersim/hardware": best["hardware"],
             "infersim/router-assumed": launch["router"]}
    if launch.get("simulated"):
        notes["infersim/simulated"] = launch["simulated"].removeprefix("# infersim simulated: ")
    if launch.get("not_expressible"):
        notes["infersim/not-expressible"] = " | ".join(launch["not_expressible"])
    return [_deployment(name, image, argv[2:], best, labels, notes), _service(name, labels, notes),
            _autoscaler(name, plan, best, labels)]


def _deployment(name: str, image: str, args: list[str], best: dict, labels: dict, notes: dict) -> dict:
    gpus = {GPU_RESOURCE: str(best.get("gpus_per_replica", best["tp"]))}  # a quantity: a string
    container = {
        "name": "vllm", "image": image, "command": ["vllm", "serve"], "args": [*args, "--port", str(VLLM_PORT)],
        "ports": [{"name": "http", "containerPort": VLLM_PORT}],
        "resources": {"limits": dict(gpus), "requests": dict(gpus)},
        "readinessProbe": {"httpGet": {"path": "/health", "port": VLLM_PORT}, "periodSeconds": 10},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels, "annotations": notes},
            "spec": {"replicas": best["replicas"], "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container],
                                           "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}}}


def _service(name: str, labels: dict, notes: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": labels, "annotations": {"infersim/router-assumed":
                                                                         notes["infersim/router-assumed"]}},
            "spec": {"selector": {"app.kubernetes.io/name": name},
                     "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": VLLM_PORT}]}}


def _autoscaler(name: str, plan: dict, best: dict, labels: dict) -> dict:
    per_replica_qps = plan["target_qps"] / best["replicas"]
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"infersim/metric": f"requests/s per replica; the plan verified "
                                                            f"{per_replica_qps:.4g} req/s per replica within the SLOs",
                                         "infersim/prometheus-adapter-rule": ADAPTER_RULE}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
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
    """The manifests as one YAML stream, headed by the launch's `# infersim simulated: <engine> <version>` line."""
    header = plan["launch"].get("simulated")
    body = yaml.dump_all(manifests(plan), Dumper=_NoAliases, sort_keys=False)
    return f"{header}\n{body}" if header else body
