"""plan --emit k8s: the recommendation as a vLLM Deployment, Service and HPA, validated against the
Kubernetes API models of the `kubernetes` client (PyPI): every object deserializes into its model
(required fields present, types right) and serializes back to exactly what was written (no unknown
or misspelled field is silently dropped)."""

from __future__ import annotations

import copy
import json
import shlex

import pytest
import yaml
from kubernetes.client import ApiClient
from typer.testing import CliRunner

from sim.cli import app

MODELS = {"Deployment": "V1Deployment", "Service": "V1Service", "HorizontalPodAutoscaler": "V2HorizontalPodAutoscaler"}


def validate(doc: dict) -> None:
    api = ApiClient()
    model = api._ApiClient__deserialize(copy.deepcopy(doc), MODELS[doc["kind"]])
    assert api.sanitize_for_serialization(model) == doc, doc["kind"]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "p"
    result = CliRunner().invoke(app, [
        "plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "120", "--workers", "1",
        "-H", "h100-sxm", "--tp", "1,2", "-p", "chunked", "--target-qps", "12", "--slo", "ttft_p99=2s", "--slo",
        "tpot_p99=100ms", "--max-verify-runs", "3", "--emit", "k8s", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "k8s.yaml").read_text()
    assert text.startswith("# infersim simulated: vLLM 0.15")  # the engine and version, above the manifests
    docs = list(yaml.safe_load_all(text))
    return docs, json.loads((out / "plan.json").read_text())


def test_manifests_parse_as_kubernetes_objects(emitted):
    docs, _ = emitted
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    for doc in docs:
        validate(doc)


def test_manifests_carry_the_plan(emitted):
    (deployment, service, hpa), plan = emitted
    best = plan["recommended"]
    spec = deployment["spec"]
    container = spec["template"]["spec"]["containers"][0]
    assert spec["replicas"] == best["replicas"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(best["tp"])
    assert container["command"] + container["args"][:len(shlex.split(plan["launch"]["command"])) - 2] == \
        shlex.split(plan["launch"]["command"])
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert deployment["metadata"]["annotations"]["infersim/simulated"].startswith("vLLM 0.15")
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert hpa["spec"]["minReplicas"] == best["replicas"]
    target_m = int(hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"].removesuffix("m"))
    assert target_m == int(plan["target_qps"] / best["replicas"] * 1000)


@pytest.mark.parametrize("break_it", [
    lambda d: d["spec"].update({"replica": 2}),  # a misspelled field
    lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),  # a required field missing
])
def test_the_validator_catches_a_broken_manifest(emitted, break_it):
    deployment = copy.deepcopy(emitted[0][0])
    break_it(deployment)
    with pytest.raises((AssertionError, ValueError)):
        validate(deployment)


def test_emit_needs_out_and_a_known_kind():
    base = ["plan", "--workload", "splitwise_conv", "--slo", "ttft_p99=2s", "--target-qps", "1"]
    for extra in (["--emit", "k8s"], ["--emit", "helm", "--out", "x"]):
        result = CliRunner().invoke(app, base + extra)
        assert result.exit_code == 2 and "--emit" in result.output


# ---------------------------------------------------------------- every engine, multi-node replicas (issue 45 item 4)

LWS_SPEC_FIELDS = {"replicas", "leaderWorkerTemplate", "rolloutStrategy", "startupPolicy", "networkConfig"}
LWS_TEMPLATE_FIELDS = {"size", "restartPolicy", "leaderTemplate", "workerTemplate", "subGroupPolicy",
                       "volumeClaimTemplates"}  # leaderworkerset.x-k8s.io/v1 LeaderWorkerSetSpec / LeaderWorkerTemplate


def validate_lws(doc: dict) -> None:
    """The LeaderWorkerSet CRD is not in the `kubernetes` models: its metadata and pod templates are core
    v1 objects (validated as such), its own fields checked against the v1 API's names."""
    api = ApiClient()
    assert doc["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and doc["kind"] == "LeaderWorkerSet"
    meta = api._ApiClient__deserialize(copy.deepcopy(doc["metadata"]), "V1ObjectMeta")
    assert api.sanitize_for_serialization(meta) == doc["metadata"]
    assert set(doc["spec"]) <= LWS_SPEC_FIELDS and isinstance(doc["spec"]["replicas"], int)
    template = doc["spec"]["leaderWorkerTemplate"]
    assert set(template) <= LWS_TEMPLATE_FIELDS and template["size"] >= 2
    for role in ("leaderTemplate", "workerTemplate"):
        pod = api._ApiClient__deserialize(copy.deepcopy(template[role]), "V1PodTemplateSpec")
        assert api.sanitize_for_serialization(pod) == template[role], role


def _plan_of(cfg, replicas: int = 2, target_qps: float = 10.0) -> dict:
    from sim.inputs.hardware import load_hardware
    from sim.planner.launch import launch_command

    gpus = cfg.layout().n_gpus
    best = {"replicas": replicas, "hardware": cfg.hardware, "tp": cfg.tp, "gpus_per_replica": gpus,
            "gpus_per_node": load_hardware(cfg.hardware).interconnect.max_gpus_per_node}
    return {"recommended": best, "launch": launch_command(cfg, replicas), "target_qps": target_qps}


def _validate_all(docs: list[dict]) -> None:
    for doc in docs:
        validate_lws(doc) if doc["kind"] == "LeaderWorkerSet" else validate(doc)


def test_a_gb200_tp8_replica_is_a_leader_worker_set():
    """TP8 on GB200 NVL72 spans two 4-GPU compute trays: a LeaderWorkerSet of 2 pods per replica, the leader
    heading a Ray cluster and serving vLLM once both trays joined, the Service on the leaders, the HPA
    scaling the set."""
    from sim.inputs.config import EngineConfig
    from sim.planner.k8s import manifests, manifests_yaml

    plan = _plan_of(EngineConfig(model="llama-3.1-405b", weight_dtype="fp8", hardware="gb200-nvl72", tp=8,
                                 engine="vllm", policy="chunked"))
    docs = manifests(plan)
    assert [d["kind"] for d in docs] == ["LeaderWorkerSet", "Service", "HorizontalPodAutoscaler"]
    _validate_all(docs)
    lws, service, hpa = docs
    template = lws["spec"]["leaderWorkerTemplate"]
    assert lws["spec"]["replicas"] == 2 and template["size"] == 2
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "4" == worker["resources"]["limits"]["nvidia.com/gpu"]
    assert "ray start --head" in leader["args"][0] and "--distributed-executor-backend ray" in leader["args"][0]
    assert "--tensor-parallel-size 8" in leader["args"][0] and leader["args"][0].endswith("--port 8000")
    assert worker["args"][0] == 'ray start --address="$LWS_LEADER_ADDRESS:6379" --block'
    assert "readinessProbe" in leader and "readinessProbe" not in worker
    assert service["spec"]["selector"]["infersim/role"] == "leader"
    assert template["leaderTemplate"]["metadata"]["labels"].items() >= service["spec"]["selector"].items()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                             "name": lws["metadata"]["name"]}
    assert manifests_yaml(plan).startswith("# infersim simulated: vLLM 0.15")


def _dp8_over_nodes(engine: str):
    """DeepSeek-R1 fp8 on H200, tp2 x dp8 with EP (16 GPUs, two nodes): its config and the validated
    LeaderWorkerSet's leaderWorkerTemplate."""
    from sim.inputs.config import EngineConfig
    from sim.planner.k8s import manifests

    cfg = EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", tp=2, dp=8,
                       enable_expert_parallel=True, engine=engine, policy="chunked")
    docs = manifests(_plan_of(cfg))
    _validate_all(docs)
    return cfg, docs[0]["spec"]["leaderWorkerTemplate"]


def test_sglang_multi_node_pods_take_their_rank_and_the_leader_address():
    cfg, template = _dp8_over_nodes("sglang")
    for role in ("leaderTemplate", "workerTemplate"):
        container = template[role]["spec"]["containers"][0]
        assert container["image"].startswith("lmsysorg/sglang") and container["command"][:2] == ["python3", "-m"]
        args = container["args"]
        assert args[args.index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
        assert args[args.index("--dist-init-addr") + 1] == "$(LWS_LEADER_ADDRESS):20000"
        assert args[args.index("--nnodes") + 1] == "2" and args[args.index("--tp-size") + 1] == "16"
        assert args[args.index("--max-running-requests") + 1] == str(8 * cfg.max_num_seqs)  # x dp (item 3)
    leader_args = template["leaderTemplate"]["spec"]["containers"][0]["args"]
    assert leader_args[-4:] == ["--host", "0.0.0.0", "--port", "30000"]


def test_vllm_data_parallel_ranks_over_nodes_run_headless_workers():
    _, template = _dp8_over_nodes("vllm")
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    worker = template["workerTemplate"]["spec"]["containers"][0]
    assert leader["command"] == ["vllm", "serve"]
    assert leader["args"][leader["args"].index("--data-parallel-size-local") + 1] == "4"
    assert leader["args"][leader["args"].index("--data-parallel-address") + 1] == "$(LWS_LEADER_ADDRESS)"
    line = worker["args"][0]
    assert "--headless" in line and "--data-parallel-start-rank $((LWS_WORKER_INDEX * 4))" in line


@pytest.mark.parametrize("engine, image, command, port", [
    ("sglang", "lmsysorg/sglang", ["python3", "-m", "sglang.launch_server"], 30000),
    ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release", ["trtllm-serve"], 8000),
])
def test_sglang_and_trtllm_get_their_own_containers(engine, image, command, port):
    from sim.inputs.config import EngineConfig
    from sim.planner.k8s import manifests

    cfg = EngineConfig(model="llama-3-70b", hardware="h100-sxm", tp=4, engine=engine)
    plan = _plan_of(cfg)
    docs = manifests(plan)
    _validate_all(docs)
    deployment, service, _ = docs
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].startswith(image) and container["command"] == command
    argv = shlex.split(plan["launch"]["command"])
    assert container["args"][:-4] == argv[len(command):]  # the plan's line, then --host 0.0.0.0 --port
    assert container["args"][-2:] == ["--port", str(port)] and "0.0.0.0" in container["args"]
    assert service["spec"]["ports"][0]["port"] == port
    assert deployment["metadata"]["annotations"]["infersim/simulated"].split()[0] in ("SGLang", "TensorRT-LLM")


def test_trtllm_over_nodes_is_refused_after_the_plan_is_written(tmp_path):
    """A manifest that cannot be written never discards the plan (issue 45 item 4): plan.json and the plots
    are written first, then the refusal is one line, exit 2."""
    out = tmp_path / "p"
    result = CliRunner().invoke(app, [
        "plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--max-requests", "60", "--workers", "1",
        "-H", "gb200-nvl72", "--tp", "8", "--engine", "trtllm", "--target-qps", "4", "--slo", "ttft_p99=2s",
        "--max-verify-runs", "2", "--emit", "k8s", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "MPI job" in result.stderr and "plan.json and the plots are written" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert json.loads((out / "plan.json").read_text())["recommended"]["tp"] == 8
    assert (out / "pareto.png").is_file() and not (out / "k8s.yaml").exists()
