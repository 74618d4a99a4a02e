"""sim/fleet: day workloads, the slot table, autoscaling, cold starts, failures, billing (small days)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.engine.request import Status
from sim.errors import InputError
from sim.fleet.billing import summary
from sim.fleet.day import run_day
from sim.fleet.daygen import DayGenerator, DayWorkload
from sim.fleet.facts import cold_start_parts_s, hardware_facts, load_facts
from sim.fleet.policy import predictive_wanted, target_wanted
from sim.fleet.profile import RateProfile, Rates
from sim.fleet.spec import DaySpec, Predictive, TargetTracking
from sim.fleet.table import SlotTable
from sim.yamlio import validate

FIXED = {"prompt": {"kind": "fixed", "value": 200}, "output": {"kind": "fixed", "value": 40}}


def day(rate: dict, duration_s: float = 300.0, seed: int = 3, steps=(), engine=None, **fleet) -> DaySpec:
    fleet.setdefault("autoscaler", {"policy": {"kind": "static", "replicas": 2}, "interval_s": 10})
    return validate(DaySpec, {
        "workload": {"kind": "day", "duration_s": duration_s, "seed": seed, "chunk_s": 60,
                     "tenants": [{"rate": {"base": rate, "steps": list(steps)}, "lengths": FIXED}]},
        "engine": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", **(engine or {})},
        "fleet": fleet, "slo": {"ttft_s": 1.0}}, "test")


def test_day_generation_is_seeded_chunk_by_chunk_and_follows_the_rate():
    spec = validate(DayWorkload, {"kind": "day", "duration_s": 7200, "seed": 5, "chunk_s": 600, "tenants": [
        {"rate": {"base": {"kind": "diurnal", "peak_rps": 8, "trough_rps": 2, "peak_hour": 1}}, "lengths": FIXED},
        {"name": "b", "rate": {"base": {"kind": "constant", "rate_rps": 1}}, "lengths": FIXED}]}, "test")
    gen = DayGenerator(spec)
    chunks = list(gen.chunks())
    again = DayGenerator(spec).chunk(5)
    assert np.array_equal(chunks[5].arrival_s, again.arrival_s) and np.array_equal(chunks[5].tenant, again.tenant)
    times = np.concatenate([c.arrival_s for c in chunks])
    assert np.all(np.diff(times) >= 0) and times.min() >= 0 and times.max() < 7200
    expected = gen.expected_requests()
    assert abs(times.shape[0] - expected) < 5 * math.sqrt(expected)
    assert gen.rate_rps(np.array([3600.0, 3600.0 + 12 * 3600]))[0] == pytest.approx(9.0)  # peak + the constant
    assert gen.rate_rps(np.array([3600.0 + 12 * 3600]))[0] == pytest.approx(3.0)  # trough + the constant
    counts = np.bincount((times // 600).astype(int), minlength=12)
    for window, count in enumerate(counts):
        mean = gen.expected_requests(window * 600.0, window * 600.0 + 600.0)
        assert abs(count - mean) < 5 * math.sqrt(mean)


def test_rate_profile_weekly_bursts_steps_and_series():
    rates = Rates(validate(RateProfile, {"base": {"kind": "series", "window_s": 100, "rates_rps": [1, 3]},
                                         "weekly": [1, 2, 1, 1, 1, 1, 1],
                                         "bursts": [{"start_s": 50, "duration_s": 10, "multiplier": 4}],
                                         "steps": [{"at_s": 1000, "rate_rps": 7}]}, "test"))
    t = np.array([10.0, 55.0, 150.0, 250.0, 1500.0, 86_400 + 10.0])
    assert rates.rate_rps(t).tolist() == [1.0, 4.0, 3.0, 1.0, 7.0, 14.0]


def test_slot_table_reuses_and_grows_rows():
    table = SlotTable(max_model_len=1000, capacity=2)
    rows = [table.admit(float(i), 100, 5000) for i in range(5)]
    assert sorted(rows) == list(range(5)) and table.n_requests >= 5
    assert table.output_tokens[rows[0]] == 900 and table.arrival_s[rows[3]] == 3.0  # capped; kept over growth
    table.status[rows[1]] = Status.FINISHED
    table.release(rows[1])
    assert table.admit(9.0, 10, 10) == rows[1] and table.status[rows[1]] == Status.PENDING


def test_policies_track_their_target_and_forecast():
    policy = TargetTracking(kind="target", metric="running", target=10)
    assert target_wanted(policy, {"running": 60}, n_ready=3, n_current=3) == 6
    assert target_wanted(policy, {"running": 30}, n_ready=3, n_current=4) == 4  # inside the band: unchanged
    assert target_wanted(policy, {"running": 6}, n_ready=3, n_current=3) == 1
    predictive = Predictive(kind="predictive", rate_per_replica_rps=5, margin=0.0)
    rates = Rates(validate(RateProfile, {"base": {"kind": "constant", "rate_rps": 2},
                                         "steps": [{"at_s": 100, "rate_rps": 21}]}, "test")).rate_rps
    assert predictive_wanted(predictive, rates, 0.0, lead_s=50, interval_s=10) == 1
    assert predictive_wanted(predictive, rates, 0.0, lead_s=95, interval_s=10) == 5  # sees the step coming


def test_cold_start_is_weights_over_the_slower_link_plus_engine_start():
    from sim.inputs.config import EngineConfig
    from sim.inputs.model import load_model
    from sim.run.simulate import _replica_parts

    cfg = EngineConfig(model="llama-3.1-8b", hardware="h100-sxm", engine="vllm")
    memory, cost = _replica_parts(cfg, load_model(cfg.model), cfg.hardware, None)
    facts = load_facts()
    parts = cold_start_parts_s(facts, cfg, memory.weight_bytes_per_gpu, cost.hw.host_link_bytes_s)
    hw = hardware_facts(facts, cfg)
    load_s = memory.weight_bytes_per_gpu / min(hw.storage_read_gb_s * 1e9, cost.hw.host_link_bytes_s)
    assert parts["total_s"] == pytest.approx(load_s + facts.engines["vllm"].startup_s
                                             + facts.engines["vllm"].cuda_graph_capture_s)
    eager = cold_start_parts_s(facts, cfg.model_copy(update={"enforce_eager": True}), memory.weight_bytes_per_gpu,
                               cost.hw.host_link_bytes_s)
    assert eager["cuda_graph_capture_s"] == 0.0


def test_static_day_ends_every_request_is_deterministic_and_bills_exactly():
    spec = day({"kind": "constant", "rate_rps": 4}, pricing={"reserved_replicas": 2})
    first, second = run_day(spec), run_day(spec)
    prices = hardware_facts(load_facts(), first.cfg).price_per_gpu_h
    a, b = summary(first, prices), summary(second, prices)
    a.pop("wall_time_s"), b.pop("wall_time_s")
    assert a == b
    assert a["n_arrived"] == a["n_finished"] > 1000 and a["n_lost"] == a["n_rejected"] == 0
    # rows are reused: the table never outgrew its first 4096 rows, nor held more than a few dozen at once
    assert a["request_table_rows"] == 4096 and a["peak_requests_in_flight"] < 100
    assert a["gpu_hours"] == pytest.approx(2 * 300 / 3600)
    assert a["dollars"]["reserved"] == pytest.approx(2 * 300 / 3600 * prices.reserved)
    assert a["dollars"]["on_demand"] == 0.0 and a["slo_attainment"] > 0.99


def test_a_step_up_waits_a_cold_start_and_prediction_shortens_the_dip():
    rate = {"kind": "constant", "rate_rps": 3}
    steps = [{"at_s": 150, "rate_rps": 40}]  # a replica of 8 sequences serves ~20 req/s of these
    reactive = {"policy": {"kind": "target", "metric": "queue_length", "target": 2}, "interval_s": 10,
                "cooldown_up_s": 10, "max_replicas": 8}
    predictive = {**reactive, "policy": {"kind": "predictive", "rate_per_replica_rps": 12,
                                         "reactive": reactive["policy"]}}
    runs = {}
    for name, autoscaler in (("reactive", reactive), ("predictive", predictive)):
        runs[name] = run_day(day(rate, duration_s=400, steps=steps, autoscaler=autoscaler, engine={"max_num_seqs": 8}))
    cold_s = runs["reactive"].cold_start["total_s"]
    launched = [r for r in runs["reactive"].replicas if r.launch_s > 0]
    assert launched and all(r.ready_s == pytest.approx(r.launch_s + cold_s) for r in launched)
    assert min(r.launch_s for r in launched) >= 150  # it reacts only once the queue builds
    assert min(r.launch_s for r in runs["predictive"].replicas if r.launch_s > 0) < 150  # ahead of the step
    good = {name: run.tally.totals()["slo_attainment"] for name, run in runs.items()}
    assert good["predictive"] > good["reactive"]


@pytest.mark.parametrize("on_failure", ["retry", "lost"])
def test_a_failed_replica_loses_or_retries_its_requests_and_gets_no_more(on_failure):
    spec = day({"kind": "constant", "rate_rps": 6},
               failures={"schedule": [{"at_s": 150}], "on_failure": on_failure, "repair_s": 1000})
    result = run_day(spec)
    totals = result.tally.totals()
    failed = [r for r in result.replicas if r.state == "failed"]
    assert result.n_failures == 1 and len(failed) == 1 and failed[0].stop_s == 150
    assert totals["n_arrived"] == totals["n_finished"] + totals["n_lost"] + totals["n_rejected"]
    if on_failure == "lost":
        assert totals["n_lost"] > 0 and totals["n_retried"] == 0
    else:
        assert totals["n_retried"] > 0 and totals["n_lost"] == 0
    # the pool (max_replicas defaults to 64) lets the static fleet replace it after a cold start
    assert len(result.replicas) == 3 and result.replicas[2].launch_s >= 150


def test_a_node_failure_takes_several_replicas_and_the_pool_waits_for_repair():
    spec = day({"kind": "constant", "rate_rps": 6}, autoscaler={
        "policy": {"kind": "static", "replicas": 3}, "interval_s": 10, "max_replicas": 3},
        failures={"schedule": [{"at_s": 100, "count": 2}], "repair_s": 150})
    result = run_day(spec)
    assert result.n_failures == 2 and sorted(r.stop_s for r in result.replicas if r.state == "failed") == [100, 100]
    replacements = [r for r in result.replicas if r.launch_s > 0]
    assert len(replacements) == 2 and all(r.launch_s >= 250 for r in replacements)  # only once repaired
    assert result.tally.totals()["n_lost"] == 0


def test_bad_day_spec_is_one_clear_error():
    with pytest.raises(InputError, match="trough_rps must be <= peak_rps"):
        day({"kind": "diurnal", "peak_rps": 1, "trough_rps": 2})
    with pytest.raises(InputError, match="speculative decoding"):
        spec = day({"kind": "constant", "rate_rps": 1})
        run_day(spec.model_copy(update={"engine": {**spec.engine, "spec_tokens": 2}}))


def test_round_robin_horizons_per_replica_change_nothing(monkeypatch):
    """Each replica planning up to its own next round-robin arrival gives the run that planning up
    to every arrival gives (the fleet's other events stay horizons for all)."""
    import sim.fleet.cluster as cluster

    spec = day({"kind": "diurnal", "peak_rps": 12, "trough_rps": 3, "peak_hour": 0.05}, duration_s=240,
               router="round_robin", autoscaler={"policy": {"kind": "target", "metric": "running", "target": 6},
                                                 "interval_s": 10, "cooldown_up_s": 10, "max_replicas": 4},
               failures={"schedule": [{"at_s": 120}]}, engine={"max_num_seqs": 8}, initial_replicas=3)
    fast = run_day(spec)
    monkeypatch.setattr(cluster, "RoundRobinRouter", type("NotRecognised", (), {}))
    slow = run_day(spec)
    assert max(fast.timeline["ready"]) >= 2 and fast.n_failures == 1
    for name in fast.tally.counts:
        assert np.array_equal(fast.tally.counts[name], slow.tally.counts[name])
    assert np.array_equal(fast.tally.ttft_hist, slow.tally.ttft_hist)
    assert np.array_equal(fast.tally.e2e_hist, slow.tally.e2e_hist)
    assert fast.timeline == slow.timeline


def test_spot_replicas_are_priced_as_spot_and_interrupted_at_their_rate():
    facts = load_facts().hardware["h100-sxm"].model_dump()
    facts.update(spot_interruptions_per_h=30.0, gpu_mtbf_h=1e7)  # spot: ~2 min lives; MTBF: none (10^7 h)
    spec = day({"kind": "constant", "rate_rps": 3}, duration_s=600,
               autoscaler={"policy": {"kind": "static", "replicas": 2}, "interval_s": 10},
               pricing={"spot_share": 1.0}, failures={"on_failure": "retry", "repair_s": 0},
               facts={"hardware": {"h100-sxm": facts}})
    result = run_day(spec)
    prices = hardware_facts(load_facts(spec.fleet.facts), result.cfg).price_per_gpu_h
    s = summary(result, prices)
    assert all(r.kind == "spot" for r in result.replicas)
    assert result.n_failures >= 3 and s["n_retried"] > 0 and s["n_lost"] == 0
    assert s["dollars"]["on_demand"] == 0.0 and s["dollars"]["spot"] == pytest.approx(s["gpu_hours"] * prices.spot)
    assert s["n_arrived"] == s["n_finished"]


def test_a_bundled_hour_long_trace_tiles_its_shape_over_the_day():
    from sim.fleet.profile import trace_shape_series
    from sim.inputs.workload.read_trace import load_trace

    profile = validate(RateProfile, {"base": {"kind": "trace_shape", "trace": "splitwise_conv", "window_s": 60,
                                              "mean_rps": 5.0}}, "test")
    series = trace_shape_series(profile.base)
    arrival_s = load_trace("splitwise_conv").arrival_s
    counts = np.bincount(((arrival_s - arrival_s.min()) // 60).astype(int))
    assert series.shape == counts.shape and series.mean() == pytest.approx(5.0)
    assert np.allclose(series / series.sum(), counts / counts.sum())  # the trace's own shape
    rates = Rates(profile, series)
    period_s = 60.0 * series.shape[0]
    t = np.array([30.0, 630.0])
    assert np.array_equal(rates.rate_rps(t), rates.rate_rps(t + 5 * period_s))  # tiled
