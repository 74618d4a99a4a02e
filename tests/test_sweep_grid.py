"""Sweep grids: parsing `--grid`, the cartesian product over a base, point ids, one-row flattening."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.sweep.grid import expand, load_base, parse_grid, point_id, sweepable_keys
from sim.sweep.point import flatten, point_row, point_workload


def test_values_are_typed_yaml_scalars_in_grid_order():
    grid = parse_grid(["max_num_seqs=32, 64", "policy=chunked,radix", "gpu_memory_utilization=0.8,0.9",
                       "radix_chunked=true,false", "max_model_len=null,4096"])
    assert grid == {"max_num_seqs": [32, 64], "policy": ["chunked", "radix"], "gpu_memory_utilization": [0.8, 0.9],
                    "radix_chunked": [True, False], "max_model_len": [None, 4096]}


@pytest.mark.parametrize("option, field, words", [
    ("nonsense=1,2", "nonsense", "unknown parameter; one of"),
    ("max_num_seqs=", "max_num_seqs", "empty value"),
    ("max_num_seqs=32,,64", "max_num_seqs", "empty value"),
    ("max_num_seqs", None, "is not key=v1,v2"),
    ("=32", None, "is not key=v1,v2"),
    ("max_num_seqs=32,32", "max_num_seqs", "listed twice"),
    ("block_size={a: 1}", "block_size", "not a single value"),
    ("slo=1", "slo", "unknown parameter"),
])
def test_bad_grid_options_name_the_key(option, field, words):
    with pytest.raises(InputError) as info:
        parse_grid([option])
    assert info.value.where == "--grid" and info.value.field == field
    assert words in info.value.allowed


def test_unknown_key_lists_every_allowed_one_and_repeated_keys_are_refused():
    with pytest.raises(InputError) as info:
        parse_grid(["max_batch=8"])
    for key in ("max_num_seqs", "block_size", "qps", "rate_scale", "policy"):
        assert key in info.value.allowed
    with pytest.raises(InputError, match="given twice"):
        parse_grid(["block_size=8", "block_size=16"])
    with pytest.raises(InputError, match="at least one"):
        parse_grid([])


def test_product_runs_last_key_fastest_and_every_point_is_a_full_config():
    points = expand({"policy": "chunked"}, {"max_requests": 10},
                    parse_grid(["max_num_seqs=32,64", "block_size=8,16,32", "qps=5"]))
    assert [(p.grid_values["max_num_seqs"], p.grid_values["block_size"]) for p in points] == [
        (32, 8), (32, 16), (32, 32), (64, 8), (64, 16), (64, 32)]
    assert all(p.config["policy"] == "chunked" and p.workload == {"trace": None, "format": None, "max_requests": 10,
                                                                  "qps": 5.0, "rate_scale": None, "trace_qps": None}
               for p in points)
    assert EngineConfig.model_validate(points[4].config).block_size == 16
    assert len({p.point_id for p in points}) == 6


@pytest.mark.parametrize("option, field", [("max_num_seqs=abc", "max_num_seqs"), ("block_size=0", "block_size"),
                                           ("policy=fifo", "policy"), ("qps=-1", "qps")])
def test_bad_values_fail_before_anything_runs(option, field):
    with pytest.raises(InputError) as info:
        expand({}, {}, parse_grid([option]))
    assert info.value.where == "--grid" and info.value.field == field


def test_a_grid_qps_replaces_a_base_rate_scale():
    (point,) = expand({}, {"rate_scale": 2.0}, parse_grid(["qps=3"]))
    assert point.workload["qps"] == 3.0 and point.workload["rate_scale"] is None


def test_point_ids_are_stable_and_see_the_whole_point():
    grid = parse_grid(["block_size=8,16"])
    first = expand({}, {"max_requests": 10}, grid)
    again = expand({}, {"max_requests": 10}, grid)
    other_base = expand({"max_num_seqs": 8}, {"max_requests": 10}, grid)
    other_cut = expand({}, {"max_requests": 11}, grid)
    ids = [p.point_id for p in first]
    assert ids == [p.point_id for p in again]
    assert not set(ids) & {p.point_id for p in other_base + other_cut}
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.sampled_from(["block_size", "max_num_seqs", "chunk_size"]), st.integers(1, 10_000),
                       min_size=1))
def test_point_id_is_a_function_of_the_normalized_dict(values):
    cfg = EngineConfig.model_validate({**values, "policy": "chunked", "max_num_batched_tokens": 10_000}).model_dump(
        mode="json")
    shuffled = dict(reversed(list(cfg.items())))
    assert point_id(cfg, {"trace": None}) == point_id(shuffled, {"trace": None})
    bumped = {**cfg, "block_size": cfg["block_size"] + 1}
    assert point_id(bumped, {"trace": None}) != point_id(cfg, {"trace": None})


def test_base_yaml_holds_config_and_workload_keys(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("policy: chunked\nmax_num_seqs: 64\ntrace: mooncake_conversation\nmax_requests: 20\n")
    engine, workload = load_base(base)
    assert engine == {"policy": "chunked", "max_num_seqs": 64, "engine": "vllm"}  # plan's engine unless named
    assert workload == {"trace": "mooncake_conversation", "max_requests": 20}
    base.write_text("max_num_seqs: 64\nbogus: 1\n")
    with pytest.raises(InputError) as info:
        load_base(base)
    assert info.value.where == str(base) and info.value.field == "bogus"


def test_flatten_and_the_row_of_a_point():
    assert flatten({"a": 1, "ttft_s": {"p50": 2.0, "p99": 3.0}, "g": None, "n": {"x": {"y": 4}}}) == {
        "a": 1, "ttft_s_p50": 2.0, "ttft_s_p99": 3.0, "g": None, "n_x_y": 4}
    (point,) = expand({}, {}, parse_grid(["block_size=32"]))
    row = point_row(point, {"block_size": 32, "max_model_len": 8192, "ttft_s": {"p99": 0.5}})
    assert row["point_id"] == point.point_id and row["block_size"] == 32 and row["ttft_s_p99"] == 0.5
    assert row["max_model_len"] is None and row["max_model_len_resolved"] == 8192  # config None, run resolved
    assert row["slo_ttft_s"] is None and row["qps"] is None and "block_size_resolved" not in row


def test_point_workload_retimes_to_the_target_qps():
    """qps: Poisson arrivals (as simulate --qps); trace_qps: the trace's own shape at that mean."""
    from sim.run.invoke import load_run_workload

    workload = {"trace": None, "format": None, "max_requests": 50, "qps": None, "rate_scale": None, "trace_qps": 4.0}
    trace = point_workload(workload, seed=0)
    assert len(trace) == 50
    span_s = trace.arrival_s[-1] - trace.arrival_s[0]
    assert (len(trace) - 1) / span_s == pytest.approx(4.0, rel=0.05)
    poisson = point_workload({**workload, "qps": 4.0, "trace_qps": None}, seed=0)
    assert (poisson.arrival_s == load_run_workload(None, None, None, 50, 0, 4.0).arrival_s).all()
    assert sweepable_keys()[-3:] == ["trace_qps", "qps", "rate_scale"]


def test_sweep_runs_plans_engine_unless_one_is_named(tmp_path):
    """One engine everywhere (issue 45): a base without `engine` sweeps plan's default preset;
    `engine: none` (base) or `--grid engine=none` sweeps the generic engine."""
    from sim.inputs.engines.default import DEFAULT_ENGINE

    assert load_base(None)[0]["engine"] == DEFAULT_ENGINE
    base = tmp_path / "generic.yaml"
    base.write_text("engine: none\nmax_num_seqs: 64\n")
    assert load_base(base)[0] == {"engine": None, "max_num_seqs": 64}
    points = expand(load_base(None)[0], {"max_requests": 10}, parse_grid(["engine=none,vllm@0.10"]))
    assert [p.config["engine"] for p in points] == [None, "vllm@0.10"]
    assert points[0].config["max_num_seqs"] == 256 and points[1].config["max_num_seqs"] == 1024  # h100: large GPU
