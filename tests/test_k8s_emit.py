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
