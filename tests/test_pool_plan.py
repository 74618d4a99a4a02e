"""Several models on one GPU pool (issue 35 item 8): per-model plans, their replicas packed onto the pool's
nodes and scale-up domains, the pool billed once; bad pool YAML is one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app
from sim.paths import bundled_dir
from sim.planner.pool_pack import PoolReplica, pack, separate_nodes

runner = CliRunner()


def _replicas(*groups: tuple[str, int, int]) -> list[PoolReplica]:
    return [PoolReplica(name, i, gpus) for name, n, gpus in groups for i in range(n)]


def test_first_fit_decreasing_on_hgx_nodes():
    replicas = _replicas(("small", 5, 1), ("mid", 3, 4), ("big", 1, 16))
    p = pack(replicas, 8, 8)
    assert [g["replicas"] for g in p["groups"]] == [
        ["mid#0", "mid#1"], ["mid#2", "small#0", "small#1", "small#2", "small#3"], ["small#4"], ["big#0"]]
    assert [g["nodes"] for g in p["groups"]] == [1, 1, 1, 2]
    assert (p["n_nodes"], p["n_domains"], p["gpus_used"], p["gpus_in_nodes"]) == (5, 5, 33, 40)
    assert separate_nodes(replicas, 8) == 1 + 2 + 2  # small 5 GPUs: 1 node; mid 12: 2; big: 2


def test_trays_pack_into_one_nvl72_rack():
    replicas = _replicas(("a", 5, 1), ("b", 3, 4), ("c", 1, 16))
    p = pack(replicas, 4, 72)  # GB200 NVL72: 4-GPU trays, 18 per rack
    assert p["n_domains"] == 1 and p["gpus_per_domain"] == 72
    assert p["n_nodes"] == 4 + 3 + 2  # c: 4 trays; b: one tray each; a: 5 GPUs on 2 trays
    assert all(g["domain"] == 0 for g in p["groups"])
    many = pack(_replicas(("x", 19, 4)), 4, 72)
    assert (many["n_nodes"], many["n_domains"]) == (19, 2)


def _write(tmp_path: Path, spec: dict) -> str:
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


SMALL = {"hardware": "h100-sxm", "billing": "node", "tp": [1], "max_requests": 100, "verify": False,
         "models": [{"name": "chat", "model": "llama-3-8b", "workload": "splitwise_conv", "target_qps": 8,
                     "slo": {"ttft_p99": "2s", "tpot_p99": "100ms"}},
                    {"name": "code", "model": "llama-3.1-8b", "workload": "splitwise_code", "target_qps": 2,
                     "slo": {"ttft_p99": "3s"}, "engine": {"max_num_seqs": 64}}]}


def test_a_pool_plan_packs_every_model_and_bills_the_pool(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["pool", "plan", _write(tmp_path, SMALL), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    pool = json.loads((out / "pool.json").read_text())
    assert pool["complete"] and [m["name"] for m in pool["models"]] == ["chat", "code"]
    per_model = [m["recommended"] for m in pool["models"]]
    assert all(m["hardware"] == "h100-sxm" and m["tp"] == 1 for m in per_model)
    total, packing = pool["total"], pool["packing"]
    assert total["gpus_used"] == sum(m["gpus"] for m in per_model)
    assert sorted(r for g in packing["groups"] for r in g["replicas"]) == sorted(
        f"{m['name']}#{k}" for m in pool["models"] for k in range(m["recommended"]["replicas"]))
    assert total["billed_gpus"] == 8 * total["nodes"] and total["nodes"] == -(-total["gpus_used"] // 8)
    assert total["cost_per_hour_usd"] == pytest.approx(total["billed_gpus"] * pool["price_usd_per_gpu_hour"])
    assert pool["separately"]["nodes"] >= total["nodes"]
    assert "vllm serve" in pool["models"][1]["launch"] and "--max-num-seqs 64" in pool["models"][1]["launch"]
    assert "pool total" in result.stdout and "billed per node" in result.stdout
    # plan's engine by default (issue 45 item 2): the vLLM preset with its knobs, named above every line
    chat = pool["models"][0]
    assert chat["launch_simulated"].startswith("# infersim simulated: vLLM 0.15")
    assert "--max-num-seqs 1024" in chat["launch"] and "--disable-custom-all-reduce" not in chat["launch"]
    assert chat["recommended"]["policy"] == "radix"  # vLLM's default policy, as plan searches it
    assert "# infersim simulated: vLLM 0.15" in result.stdout


def test_a_pool_entry_can_name_the_generic_engine(tmp_path):
    spec = {**SMALL, "models": [{**SMALL["models"][0], "engine": {"engine": "none"}}]}
    out = tmp_path / "run"
    result = runner.invoke(app, ["pool", "plan", _write(tmp_path, spec), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    chat = json.loads((out / "pool.json").read_text())["models"][0]
    assert "the generic engine" in chat["launch_simulated"] and "--max-num-seqs 256" in chat["launch"]


def test_the_bundled_example_loads():
    from sim.planner.pool import load_pool_spec

    spec = load_pool_spec(bundled_dir("workloads") / "pools" / "three_models_h100.yaml")
    assert len(spec.models) == 3 and spec.hardware == "h100-sxm"


def _bad(update: dict | None = None, model_update: dict | None = None) -> dict:
    spec = json.loads(json.dumps(SMALL))
    spec.update(update or {})
    if model_update:
        spec["models"][0].update(model_update)
    return spec


@pytest.mark.parametrize(("spec", "needles"), [
    (_bad({"gpus": 8}), ["gpus", "unknown field"]),
    (_bad({"models": []}), ["models"]),
    (_bad(model_update={"name": "code"}), ["models", "'code' is given twice"]),
    (_bad(model_update={"target_qps": -1}), ["models.0.target_qps"]),
    (_bad(model_update={"engine": {"tp": 4}}), ["models.0.engine.tp", "searched"]),
    (_bad(model_update={"slo": {"ttft_p42": "2s"}}), ["models.0 (chat)", "ttft_p42", "unknown SLO key"]),
    (_bad(model_update={"slo": {"ttft_p99": "2"}}), ["models.0 (chat)", "ttft_p99"]),
    (_bad(model_update={"engine": {"max_num_seqs": 0}}), ["models.0 (chat)", "engine", "max_num_seqs"]),
    (_bad({"billing": "tray"}), ["billing"]),
    (_bad({"hardware": "tpu-v9"}), ["tpu-v9"]),
])
def test_bad_pool_yaml_is_one_line_and_exit_2(tmp_path, spec, needles):
    path = _write(tmp_path, spec)
    out = tmp_path / "earlier"
    out.mkdir()
    (out / "pool.json").write_text('{"an": "earlier run"}')
    result = runner.invoke(app, ["pool", "plan", path, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert (out / "pool.json").read_text() == '{"an": "earlier run"}'  # nothing already written is lost
