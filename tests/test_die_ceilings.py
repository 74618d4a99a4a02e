"""One die, one set of kernel ceilings (issue 35 item 4): profiles naming the same `die` price the same
kernels alike; rack-scale GB200 NVL72 differs from HGX B200 in interconnect, memory, peaks (its 1,200 W
datasheet) and price, lets a layout span the trays of its NVLink domain, and bills a stated unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sim.cli import app
from sim.errors import InputError
from sim.inputs.hardware import DIE_KEYS, bundled_profiles, load_hardware
from sim.paths import bundled_dir
from sim.planner.billing import Billing, billing_of, parse_billing

runner = CliRunner()


def die_ceiling_mismatches(profiles) -> list[str]:
    """'die: key' for every kernel-ceiling key on which profiles naming one die differ."""
    by_die: dict[str, list] = {}
    for hw in profiles:
        if hw.die is not None:
            by_die.setdefault(hw.die, []).append(hw)
    out = []
    for die, group in by_die.items():
        for key in DIE_KEYS:
            values = {json.dumps(getattr(hw, key).model_dump() if hasattr(getattr(hw, key), "model_dump")
                                 else getattr(hw, key), sort_keys=True, default=str) for hw in group}
            if len(values) > 1:
                out.append(f"{die}: {key} differs among {', '.join(hw.name for hw in group)}")
    return out


def test_bundled_profiles_naming_one_die_hold_equal_ceilings():
    profiles = [load_hardware(name) for name in bundled_profiles()]
    assert {hw.name for hw in profiles if hw.die == "b200"} == {"b200", "gb200-nvl72"}
    assert die_ceiling_mismatches(profiles) == []


def _profile_file(tmp_path: Path, name: str, mutate) -> str:
    data = yaml.safe_load((bundled_dir("hwprofiles") / f"{name}.yaml").read_text())
    mutate(data)
    path = tmp_path / f"{name}-copy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_check_fails_when_one_ceiling_drifts(tmp_path):
    def drift(data):
        data["efficiency"] = {**load_hardware("b200").efficiency.model_dump(exclude_none=True)}
        data["efficiency"]["gemm_compute_max_by_op"] = {"experts": 0.5}
        data["uncertainty"] = load_hardware("b200").uncertainty  # a profile giving efficiency lends nothing
        data["calibration"] = load_hardware("b200").calibration  # (the measured GEMM grid included)

    drifted = load_hardware(_profile_file(tmp_path, "gb200-nvl72", drift))
    assert die_ceiling_mismatches([load_hardware("b200"), drifted]) == [
        "b200: efficiency differs among b200, gb200-nvl72"]


def test_a_profile_naming_a_die_takes_its_ceilings_and_their_sources():
    b200, gb200 = load_hardware("b200"), load_hardware("gb200-nvl72")
    assert gb200.efficiency == b200.efficiency and gb200.uncertainty == b200.uncertainty
    assert gb200.efficiency.gemm_compute_max_by_op == {"experts": 0.11, "experts_ep": 0.14}
    assert "fitted end to end" in gb200.sources["gemm_compute_max_by_op"]
    assert "all_to_all" not in gb200.sources  # interconnect sources stay the profile's own
    assert gb200.sources["collectives.nccl"].startswith("derived: b200")
    assert gb200.interconnect.scale_up_domain_gpus == 72 and gb200.compute != b200.compute


@pytest.mark.parametrize(("die", "needle"), [("tpu-v9", "no bundled die reference"),
                                             ("h800", "no bundled die reference")])
def test_an_unknown_die_is_one_line_and_exit_2(tmp_path, die, needle):
    path = _profile_file(tmp_path, "gb200-nvl72", lambda d: d.update(die=die))
    with pytest.raises(InputError, match=needle):
        load_hardware(path)
    result = runner.invoke(app, ["roofline", "--hardware", path])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "die" in result.stderr and "Traceback" not in result.stderr + result.stdout


def _roofline(hardware: str, *layout: str) -> dict:
    result = runner.invoke(app, ["roofline", "--model", "deepseek-r1", "--weight-dtype", "fp8", *layout,
                                 "--hardware", hardware, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    return {phase: {op["name"]: op for op in data[phase]["ops"]} for phase in ("prefill", "decode")}


LAYOUTS = [("--tp", "2", "--dp", "4", "--enable-expert-parallel"), ("--tp", "8")]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_b200_and_gb200_price_every_op_alike_inside_one_nvlink_domain(tmp_path, layout):
    """Memory-bound and network ops within 5 %; compute-bound ones differ by the datasheet peaks only
    (2,500 / 2,250 TFLOPS); with B200's peaks the GB200 profile prices every op within 1 %."""
    b200, gb200 = _roofline("b200", *layout), _roofline("gb200-nvl72", *layout)
    b200_peaks = load_hardware("b200").compute.model_dump()
    same_peaks = _roofline(_profile_file(tmp_path, "gb200-nvl72", lambda d: d.update(compute=b200_peaks)), *layout)
    peak_ratio = 2250 / 2500
    for phase in ("prefill", "decode"):
        assert set(b200[phase]) == set(gb200[phase])
        for name, op in b200[phase].items():
            ratio = gb200[phase][name]["time_s"] / op["time_s"]
            assert peak_ratio * 0.99 <= ratio <= 1.0 + 1e-9, (phase, name, ratio)
            if op["bound"] in ("memory", "network"):  # the roofline blend keeps a little of the compute term
                assert ratio >= 0.95, (phase, name, ratio)
            assert same_peaks[phase][name]["time_s"] == pytest.approx(op["time_s"], rel=0.01), (phase, name)


def test_a_tp_group_may_span_the_trays_of_an_nvlink_domain():
    from sim.inputs.config import EngineConfig
    from sim.planner.candidates import build_candidates

    base = EngineConfig(model="llama-3-70b")
    runnable, skipped = build_candidates(base, ["gb200-nvl72", "b200"], [8, 16], ["chunked"])
    kept = {(c.cfg.hardware, c.cfg.tp) for c in runnable}
    assert {("gb200-nvl72", 8), ("gb200-nvl72", 16), ("b200", 8)} <= kept
    (b200_16,) = [s for s in skipped if (s.hardware, s.tp) == ("b200", 16)]
    assert "exceeds the 8 GPUs of one node (tensor parallelism stays in one NVLink domain" in b200_16.reason
    tp16 = _roofline("gb200-nvl72", "--tp", "16")
    assert "allreduce_scale_out" not in tp16["prefill"]  # 4 trays, one NVLink domain: no NIC hop
    assert "allreduce_scale_out" in _roofline("b200", "--tp", "16")["prefill"]  # two HGX boards


def test_billing_units_count_whole_trays_and_racks():
    gb200 = load_hardware("gb200-nvl72")
    assert billing_of(gb200) == Billing("rack", 72, "profile")
    assert billing_of(load_hardware("b200")) == Billing("gpu", 1, "profile")
    node, rack, gpu = billing_of(gb200, "node"), billing_of(gb200, "rack"), billing_of(gb200, "gpu")
    assert [node.billed_gpus(r, 8) for r in (1, 2, 3)] == [8, 16, 24]  # a TP-8 replica takes two trays
    assert [node.billed_gpus(r, 1) for r in (1, 4, 5)] == [4, 4, 8]
    assert [rack.billed_gpus(r, 8) for r in (1, 9, 10)] == [72, 72, 144]
    assert gpu.billed_gpus(3, 8) == 24
    assert parse_billing(["node", "gb200-nvl72=rack"], ["b200", "gb200-nvl72"]) == {"b200": "node",
                                                                                   "gb200-nvl72": "rack"}
    for bad in (["tray"], ["h100-sxm=rack"], ["gb200-nvl72=rack", "gb200-nvl72=node"]):
        with pytest.raises(InputError):
            parse_billing(bad, ["b200", "gb200-nvl72"])


def test_plan_bills_and_prints_the_stated_unit(tmp_path):
    args = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--slo", "ttft_p99=2s",
            "--slo", "tpot_p99=100ms", "--hardware", "gb200-nvl72", "--tp", "1", "--policy", "chunked",
            "--target-qps", "5", "--max-requests", "100", "--no-verify"]
    rack = runner.invoke(app, args)
    assert rack.exit_code == 0, rack.output
    assert "billing: per rack of 72 GPUs, 1 x 72 = 72 GPUs billed for 1 used" in rack.stdout
    assert "$756.00/hour" in rack.stdout  # 72 x $10.50
    tray = runner.invoke(app, [*args, "--billing", "node", "--json"])
    best = json.loads(tray.stdout)["recommended"]
    assert best["billing"] == {"unit": "node", "gpus_per_unit": 4, "from": "--billing", "units": 1, "billed_gpus": 4}
    assert best["cost_per_hour_usd"] == pytest.approx(42.0)
    bad = runner.invoke(app, [*args, "--billing", "tray"])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--billing" in bad.stderr


def test_an_engine_prices_the_all_reduce_of_one_tray_as_on_hgx_and_drops_its_kernel_across_trays():
    """vLLM's custom all-reduce runs inside a node (CUDA IPC): a GB200 tray of 4 as an HGX B200 board; a
    TP-8 group over two trays takes NCCL (b200's 8-GPU NVLink ring fit), as vLLM disables it across nodes."""
    from sim.cost.collectives import engine_allreduce
    from sim.inputs.engines.preset import load_engine

    rule = load_engine("vllm").custom_allreduce
    b200, gb200 = load_hardware("b200"), load_hardware("gb200-nvl72")
    for tp in (2, 4):
        assert engine_allreduce(gb200, tp, rule) == engine_allreduce(b200, tp, rule)
        assert engine_allreduce(gb200, tp, rule)[0] is not None  # the custom kernel
    custom, nccl, _ = engine_allreduce(gb200, 8, rule)
    assert custom is None and nccl == engine_allreduce(b200, 8, rule)[1]
    assert engine_allreduce(b200, 8, rule)[0] is not None  # one HGX board: custom kernel on
