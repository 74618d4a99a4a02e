"""`plan --emit k8s` for a plan whose cheapest verified layout is a disaggregated one (plan.json
`disaggregated.cheapest` a P:D ratio, not `aggregated`): llm-d-style prefill and decode workloads.

Per role (prefill, decode): a Deployment, or a LeaderWorkerSet when one of the group's replicas spans
nodes (sim/planner/k8s_lws.py), of the chosen split's `prefill_replicas` / `decode_replicas`, each pod on
the group's GPUs running the group's line from plan.json `disaggregated.launch` (sim/planner/launch_disagg.py:
its layout flags plus the engine's KV-transfer flags), its pods labelled `llm-d.ai/role: prefill|decode`
(the label llm-d's inference scheduler filters on), and a Service per role.

The engines' wiring (facts from their docs and source):
- vLLM: every server takes `--kv-transfer-config` with the NixlConnector (`kv_role` `kv_both`); a decode
  server reaches the prefill server's NIXL side channel at VLLM_NIXL_SIDE_CHANNEL_HOST:PORT, which must be
  an address other pods can reach: the pod IP (downward API), port 5600 (vLLM's default, stated). vLLM has
  no prefill/decode flag: the proxy in front sends the prompt to a prefill server, then the request with
  the transfer's parameters to a decode server. That proxy (llm-d's inference scheduler with its routing
  sidecar on decode pods, or vLLM's disaggregated-serving proxy example) is NOT written: an annotation names
  it; the Services reach one role each and do no hand-off.
- SGLang: `--disaggregation-mode prefill|decode`; the prefill server's bootstrap port (8998,
  `--disaggregation-bootstrap-port`'s default) is announced to the router by the pod annotation
  `sglang.ai/bootstrap-port`. The router is written: a Deployment running
  `python3 -m sglang_router.launch_router --pd-disaggregation --service-discovery` with the two roles'
  label selectors (it watches the pods, hence its ServiceAccount, Role and RoleBinding) and a Service in
  front of it: the cluster's entrypoint.
- TensorRT-LLM (its own `trtllm-serve disaggregated` orchestrator and cache-transceiver YAML) and
  LMDeploy: refused (InputError), after plan.json and the plots are written (sim/cli/plan.py).

No HorizontalPodAutoscaler: the plan verified the two groups at a fixed P:D ratio, which an autoscaler per
role would not keep; the workloads' annotation says so.
"""

from __future__ import annotations

import shlex

from sim.errors import InputError
from sim.planner.k8s_engines import engine_container, pod_container, pod_spec, split_line
from sim.planner.k8s_lws import leader_worker_set

ROLES = ("prefill", "decode")
ROLE_LABEL = "llm-d.ai/role"  # llm-d's prefill/decode label
DISAGG_ENGINES = ("vllm", "sglang")
NIXL_SIDE_CHANNEL_PORT = 5600  # vLLM's VLLM_NIXL_SIDE_CHANNEL_PORT default
SGLANG_BOOTSTRAP_PORT = 8998  # SGLang's --disaggregation-bootstrap-port default
SGLANG_BOOTSTRAP_ANNOTATION = "sglang.ai/bootstrap-port"  # read by sglang_router's service discovery
ROUTER_PORT = 8000
SGLANG_ROUTER_POLICIES = ("round_robin", "random")  # simulated routers sglang_router runs by the same name
VLLM_ROUTER_NOTE = ("not written: a P/D-aware proxy must front these Services, sending the prompt to a prefill pod "
                    "and then the request with its kv_transfer_params to a decode pod: llm-d's inference scheduler "
                    "(ghcr.io/llm-d/llm-d-inference-scheduler, an Endpoint Picker for a Gateway API Inference "
                    "Extension InferencePool, selecting pods by llm-d.ai/role) with llm-d's routing sidecar "
                    "(ghcr.io/llm-d/llm-d-routing-sidecar) on the decode pods, or vLLM's disaggregated-serving "
                    "proxy example")


def chosen_split(plan: dict) -> dict | None:
    """The P:D row plan.json names cheapest (`disaggregated.cheapest`), None when aggregated is (or no
    comparison ran)."""
    section = plan.get("disaggregated") or {}
    if not section.get("compared") or section.get("cheapest") in (None, "aggregated"):
        return None
    return next(row for row in section["splits"] if row["ratio"] == section["cheapest"])


def disaggregated_manifests(plan: dict, engine: str, name: str) -> list[dict]:
    """Per role a workload and a Service, then the router's objects (SGLang) for the chosen P:D split."""
    if engine not in DISAGG_ENGINES:
        raise InputError("--emit", "k8s", f"the plan's cheapest layout is disaggregated and its engine is {engine}: "
                                          "infersim writes disaggregated manifests for vLLM and SGLang only "
                                          "(plan.json `disaggregated` holds the P:D comparison)")
    section, split = plan["disaggregated"], chosen_split(plan)
    spec = engine_container(engine)
    base = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "infersim"}
    notes = {"infersim/derived-from": plan["launch"]["label"], "infersim/hardware": section["hardware"],
             "infersim/disaggregated": section["verdict"],
             "infersim/autoscaling": f"none written: the plan verified {split['ratio']} x{split['k']} at a fixed "
                                     "ratio; scale both groups together",
             "infersim/image": f"{spec.image}: pin the tag to the simulated version"}
    docs, selectors = [], {}
    for role in ROLES:
        line = section["launch"][role][engine]
        role_notes = {**notes, "infersim/simulated": line["simulated"].removeprefix("# infersim simulated: ")}
        if line["not_expressible"]:
            role_notes["infersim/not-expressible"] = " | ".join(line["not_expressible"])
        if engine == "vllm":
            role_notes["infersim/pd-router"] = VLLM_ROUTER_NOTE
        workload, selectors[role] = _role_workload(f"{name}-{role}", role, engine, spec, line,
                                                   split[f"{role}_replicas"], {**base, ROLE_LABEL: role}, role_notes)
        docs += [workload, _role_service(f"{name}-{role}", spec.port, selectors[role], {**base, ROLE_LABEL: role},
                                         role_notes)]
    if engine == "sglang":
        docs += _sglang_router(name, spec, selectors, {"--prefill-policy": plan["launch"]["router"],
                                                       "--decode-policy": section["decode_router"]}, base)
    return docs


def _role_workload(name: str, role: str, engine: str, spec, line: dict, replicas: int, labels: dict,
                   notes: dict) -> tuple[dict, dict]:
    """(Deployment or LeaderWorkerSet of one role, the selector of its serving pods)."""
    per_node = line["per_node"]
    if per_node is not None:
        if "refused" in per_node:
            raise InputError("--emit", "k8s", per_node["refused"])
        workload = leader_worker_set(name, spec, per_node, replicas, labels, notes)
        templates = [workload["spec"]["leaderWorkerTemplate"][t] for t in ("leaderTemplate", "workerTemplate")]
        selector = {"app.kubernetes.io/name": labels["app.kubernetes.io/name"], ROLE_LABEL: role,
                    "infersim/role": "leader"}
    else:
        command, args = split_line(engine, shlex.split(line["command"]))
        container = pod_container(spec, command, [*args, *spec.serve_args], line["gpus_per_replica"], ready=True)
        selector = {"app.kubernetes.io/name": labels["app.kubernetes.io/name"], ROLE_LABEL: role}
        template = {"metadata": {"labels": labels}, "spec": pod_spec(container)}
        workload = {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name, "labels": labels, "annotations": notes},
                    "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "template": template}}
        templates = [template]
    for template in templates:
        _wire_transfer(template, engine, role)
    return workload, selector


def _wire_transfer(template: dict, engine: str, role: str) -> None:
    """What the engine's KV transfer needs in a pod: vLLM's NIXL side channel on the pod IP; SGLang's
    prefill bootstrap port announced to the router."""
    if engine == "vllm":
        for container in template["spec"]["containers"]:
            container["env"] = [
                {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)}]
    elif role == "prefill":
        template["metadata"]["annotations"] = {SGLANG_BOOTSTRAP_ANNOTATION: str(SGLANG_BOOTSTRAP_PORT)}


def _role_service(name: str, port: int, selector: dict, labels: dict, notes: dict) -> dict:
    annotations = {k: v for k, v in notes.items() if k in ("infersim/pd-router", "infersim/disaggregated")}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels,
                                                               "annotations": annotations},
            "spec": {"selector": selector, "ports": [{"name": "http", "port": port, "targetPort": port}]}}


def _selector_terms(selector: dict) -> list[str]:
    return [f"{key}={value}" for key, value in selector.items()]


def _sglang_router(name: str, spec, selectors: dict, policies: dict, base: dict) -> list[dict]:
    """ServiceAccount, Role (read pods), RoleBinding, the router Deployment and its Service; `policies`:
    the router flag -> the router the simulation ran for that role (the prefill group's is the plan's
    --router, the decode group's `decode_router`)."""
    router = f"{name}-router"
    labels = {**base, "app.kubernetes.io/component": "pd-router"}
    selector = {"app.kubernetes.io/name": base["app.kubernetes.io/name"], "app.kubernetes.io/component": "pd-router"}
    args = ["--pd-disaggregation", "--service-discovery",
            "--prefill-selector", *_selector_terms(selectors["prefill"]),
            "--decode-selector", *_selector_terms(selectors["decode"]),
            "--service-discovery-port", str(spec.port), "--service-discovery-namespace", "$(POD_NAMESPACE)"]
    notes = {"infersim/router": "sglang_router (PyPI sglang-router) in P/D mode, finding the prefill and decode "
                                "pods by their labels; use an image that carries sglang-router at the servers' "
                                "version"}
    for flag, simulated in policies.items():
        if simulated in SGLANG_ROUTER_POLICIES:
            args += [flag, simulated]
        else:
            notes[f"infersim/{flag.strip('-')}"] = f"simulated {simulated}: no sglang_router policy of that name"
    container = {"name": "router", "image": spec.image, "command": ["python3", "-m", "sglang_router.launch_router"],
                 "args": [*args, "--host", "0.0.0.0", "--port", str(ROUTER_PORT)],
                 "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                 "ports": [{"name": "http", "containerPort": ROUTER_PORT}],
                 "readinessProbe": {"httpGet": {"path": "/health", "port": ROUTER_PORT}, "periodSeconds": 10}}
    meta = {"name": router, "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": router},
         "subjects": [{"kind": "ServiceAccount", "name": router}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {**meta, "annotations": notes},
         "spec": {"replicas": 1, "selector": {"matchLabels": selector},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"serviceAccountName": router, "containers": [container]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"selector": selector, "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": ROUTER_PORT}]}},
    ]
