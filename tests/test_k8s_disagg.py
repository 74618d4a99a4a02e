"""plan --emit k8s for a disaggregated plan (issue 45 item 4): when plan.json `disaggregated.cheapest` is a
P:D layout, k8s.yaml holds llm-d-style prefill and decode workloads (sim/planner/k8s_disagg.py), validated
against the `kubernetes` client's API models, carrying the chosen split's replica counts, GPUs and role
labels, their args reading back (as the engine's own parser reads them, tests/test_launch_roundtrip.py) to
the simulated per-rank batch, chunk and layout of each group.

The plans run on the hand-made bursty trace of test_plan_verify (400 requests, llama-3-8b, h100-sxm TP1
chunked): at TPOT p99 <= 15 ms a 2P:1D split is cheaper than aggregated (a few seconds per plan)."""

from __future__ import annotations

import copy
import json
import shlex

import pytest
import yaml
from kubernetes.client import ApiClient
from test_k8s_emit import validate, validate_lws
from test_launch_roundtrip import sglang_served, simulated, vllm_served
from test_plan_verify import TARGET_QPS, bursty_trace
from typer.testing import CliRunner

from sim.cli import app
from sim.engine.disagg.build import group_config
from sim.errors import InputError
from sim.inputs.config import EngineConfig

ROLES = ("prefill", "decode")
MODELS = {"ServiceAccount": "V1ServiceAccount", "Role": "V1Role", "RoleBinding": "V1RoleBinding"}
SERVED = {"vllm": vllm_served, "sglang": sglang_served}
MODEL_ID = "meta-llama/Meta-Llama-3-8B-Instruct"  # --model-id: the checkpoint every group's line serves


def _validate(doc: dict) -> None:
    if doc["kind"] == "LeaderWorkerSet":
        validate_lws(doc)
    elif doc["kind"] in MODELS:
        api = ApiClient()
        model = api._ApiClient__deserialize(copy.deepcopy(doc), MODELS[doc["kind"]])
        assert api.sanitize_for_serialization(model) == doc, doc["kind"]
    else:
        validate(doc)


@pytest.fixture(scope="module")
def trace_csv(tmp_path_factory):
    trace = bursty_trace()
    path = tmp_path_factory.mktemp("k8s_disagg") / "bursty.csv"
    columns = zip(trace.arrival_s, trace.prompt_tokens, trace.output_tokens, strict=True)
    path.write_text("arrival_s,prompt_tokens,output_tokens\n"
                    + "".join(f"{float(a)!r},{int(p)},{int(o)}\n" for a, p, o in columns))
    return path


def _plan_cli(trace_csv, out, engine: str, tpot: str = "15ms"):
    return CliRunner().invoke(app, [
        "plan", "--workload", str(trace_csv), "--model", "llama-3-8b", "--max-requests", "100", "-H", "h100-sxm",
        "--tp", "1", "-p", "chunked", "--engine", engine, "--target-qps", str(TARGET_QPS), "--slo", "ttft_p99=0.5s",
        "--slo", f"tpot_p99={tpot}", "--disagg", "2:1", "--workers", "1", "--model-id", MODEL_ID, "--emit", "k8s",
        "--out", str(out)])


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def emitted(request, trace_csv, tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "p"
    result = _plan_cli(trace_csv, out, request.param)
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["disaggregated"]["cheapest"] == "2P:1D"  # the split won: its manifests are written
    assert "k8s.yaml (the 2P:1D x1 disaggregated layout)" in " ".join(result.output.split())
    text = (out / "k8s.yaml").read_text()
    return request.param, text, list(yaml.safe_load_all(text)), plan


def _by(docs: list[dict], kind: str, role: str) -> dict:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["labels"].get("llm-d.ai/role") == role)


def test_every_object_validates_and_the_header_names_the_split(emitted):
    engine, text, docs, plan = emitted
    kinds = [d["kind"] for d in docs]
    assert kinds[:4] == ["Deployment", "Service", "Deployment", "Service"]
    router = ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"] if engine == "sglang" else []
    assert kinds[4:] == router and "HorizontalPodAutoscaler" not in kinds
    for doc in docs:
        _validate(doc)
    header = text.splitlines()[:2]
    assert header[0].startswith("# infersim simulated: " + {"vllm": "vLLM", "sglang": "SGLang"}[engine])
    assert header[1] == f"# infersim disaggregated: {plan['disaggregated']['verdict']}"


def test_each_role_carries_the_split_replicas_gpus_and_role_label(emitted):
    _, _, docs, plan = emitted
    split = next(s for s in plan["disaggregated"]["splits"] if s["ratio"] == "2P:1D")
    for role in ROLES:
        deployment, service = _by(docs, "Deployment", role), _by(docs, "Service", role)
        assert deployment["spec"]["replicas"] == split[f"{role}_replicas"]
        pod = deployment["spec"]["template"]
        assert pod["metadata"]["labels"]["llm-d.ai/role"] == role
        assert MODEL_ID in pod["spec"]["containers"][0]["args"]
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"  # TP1 groups
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items() and selector["llm-d.ai/role"] == role
        assert service["spec"]["selector"] == selector
    assert split["prefill_replicas"] == 2 and split["decode_replicas"] == 1


def test_args_read_back_as_each_group_was_simulated(emitted):
    engine, _, docs, _ = emitted
    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm", tp=1, policy="chunked", engine=engine)
    for role in ROLES:
        container = _by(docs, "Deployment", role)["spec"]["template"]["spec"]["containers"][0]
        line = shlex.join(["python", *container["command"][1:]] if engine == "sglang" else container["command"])
        served = SERVED[engine](f"{line} {shlex.join(container['args'])}")
        assert served == simulated(group_config(cfg, role)), role


def test_each_engine_wires_its_kv_transfer(emitted):
    engine, _, docs, _ = emitted
    for role in ROLES:
        pod = _by(docs, "Deployment", role)["spec"]["template"]
        args = pod["spec"]["containers"][0]["args"]
        if engine == "vllm":
            config = json.loads(args[args.index("--kv-transfer-config") + 1])
            assert config == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
            env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
            assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            assert "llm-d-inference-scheduler" in _by(docs, "Deployment", role)["metadata"]["annotations"][
                "infersim/pd-router"]
        else:
            assert args[args.index("--disaggregation-mode") + 1] == role
            bootstrap = (pod["metadata"].get("annotations") or {}).get("sglang.ai/bootstrap-port")
            assert bootstrap == ("8998" if role == "prefill" else None)


def test_the_sglang_router_finds_each_role_by_its_services_selector(emitted):
    engine, _, docs, _ = emitted
    if engine != "sglang":
        pytest.skip("vLLM's P/D proxy is named in an annotation, not written")
    router = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-router"))
    pod = router["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    for role, flag, end in (("prefill", "--prefill-selector", "--decode-selector"),
                            ("decode", "--decode-selector", "--service-discovery-port")):
        terms = args[args.index(flag) + 1:args.index(end)]
        assert dict(t.split("=", 1) for t in terms) == _by(docs, "Service", role)["spec"]["selector"]
    assert args[args.index("--service-discovery-port") + 1] == "30000"
    binding = next(d for d in docs if d["kind"] == "RoleBinding")
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"] == binding["roleRef"]["name"]


def test_an_aggregated_win_still_writes_the_aggregated_manifests(trace_csv, tmp_path):
    out = tmp_path / "p"
    result = _plan_cli(trace_csv, out, "vllm", tpot="50ms")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "plan.json").read_text())["disaggregated"]["cheapest"] == "aggregated"
    kinds = [d["kind"] for d in yaml.safe_load_all((out / "k8s.yaml").read_text())]
    assert kinds == ["Deployment", "Service", "HorizontalPodAutoscaler"]


# ---------------------------------------------------------------- hand-built plans: multi-node groups, refusals

def _disagg_plan(cfg: EngineConfig, prefill: int = 2, decode: int = 2) -> dict:
    from sim.planner.launch import launch_command
    from sim.planner.launch_disagg import group_launch_lines

    groups = {role: group_config(cfg, role) for role in ROLES}
    split = {"ratio": "1P:1D", "k": 2, "prefill_replicas": prefill, "decode_replicas": decode}
    section = {"compared": True, "cheapest": "1P:1D", "splits": [split], "hardware": cfg.hardware,
               "verdict": "1P:1D x2 is cheapest", "decode_router": cfg.decode_router,
               "launch": group_launch_lines(groups)}
    return {"recommended": {"replicas": 4, "hardware": cfg.hardware, "tp": cfg.tp}, "target_qps": 10.0,
            "launch": launch_command(cfg, 4), "disaggregated": section}


def test_a_decode_group_wider_than_a_node_is_a_leader_worker_set():
    """DeepSeek-R1 fp8 on H200: prefill TP8 (one node) as a Deployment, decode dp8 x tp2 ep16 (16 GPUs, two
    nodes) as a LeaderWorkerSet whose every node runs the decode line with its node rank; the leader's args
    read back as the decode group was simulated."""
    from sim.planner.k8s import manifests

    cfg = EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", engine="sglang", policy="chunked",
                       tp=8, decode={"tp": 2, "dp": 8, "enable_expert_parallel": True})
    docs = manifests(_disagg_plan(cfg))
    for doc in docs:
        _validate(doc)
    prefill, decode = _by(docs, "Deployment", "prefill"), _by(docs, "LeaderWorkerSet", "decode")
    assert prefill["spec"]["replicas"] == 2 and decode["spec"]["replicas"] == 2
    template = decode["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2
    leader = template["leaderTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert template["workerTemplate"]["metadata"]["labels"]["llm-d.ai/role"] == "decode"
    line = shlex.join(["python", *leader["command"][1:], *leader["args"]])
    assert sglang_served(line) == simulated(group_config(cfg, "decode"))
    assert _by(docs, "Service", "decode")["spec"]["selector"]["infersim/role"] == "leader"


def test_trtllm_disaggregated_is_refused_in_one_line():
    from sim.planner.k8s import manifests

    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm", engine="trtllm", tp=1, policy="chunked")
    with pytest.raises(InputError, match="disaggregated manifests for vLLM and SGLang"):
        manifests(_disagg_plan(cfg))


def test_trtllm_refusal_comes_after_the_plan_is_written(trace_csv, tmp_path):
    out = tmp_path / "p"
    result = _plan_cli(trace_csv, out, "trtllm")
    assert json.loads((out / "plan.json").read_text())["disaggregated"]["cheapest"] == "2P:1D"
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert "vLLM and SGLang only" in result.stderr and "plan.json and the plots are written" in result.stderr
    assert (out / "pareto.png").is_file() and not (out / "k8s.yaml").exists()
