"""Plausible physics (issue 51 item 3): one table of ranges (sim/specs/plausible.yaml) read by the
schemas; a value off by a unit prefix is refused with the likely intended value; every bundled
profile, preset and model loads, and every bundled hardware value x 1000 is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sim.errors import InputError
from sim.schema import likely_meant, plausible_check, plausible_ranges, quantity_of
from tests.bounds_corpus import physical_fields

ROOT = Path(__file__).resolve().parents[1]


def test_every_entry_has_a_unit_a_range_and_a_reason():
    for name, entry in plausible_ranges().items():
        assert set(entry) <= {"unit", "min", "max", "why", "suggest"}, name
        assert entry["unit"] and entry["why"] and 0 <= entry["min"] < entry["max"], name


def test_the_issue_example_names_the_intended_value():
    assert plausible_check("hbm_gib", 85899345920) == (
        "85899345920 is not plausible (allowed 1-2048 GiB); did you mean 80 GiB?")
    assert "did you mean 989.4 TFLOP/s?" in plausible_check("tensor_tflops", 989.4e12)
    assert "did you mean 3350 GB/s?" in plausible_check("hbm_gb_s", 3.35e12)  # bytes/s given
    assert "did you mean 8 us?" in plausible_check("link_latency_us", 8000)  # ns given
    assert plausible_check("hbm_gib", 80) is None


def test_no_suggestion_where_no_prefix_explains_it():
    assert "did you mean" not in plausible_check("link_latency_us", 1e300)
    assert "did you mean" not in plausible_check("layers", 32000)  # a count: no unit prefix
    assert likely_meant(0.0, 1, 10) is None


def test_every_schema_field_names_an_entry_of_the_table():
    from sim.fleet.spec import DaySpec
    from sim.inputs.engines.preset import EnginePreset
    from sim.inputs.hardware import HardwareProfile
    from sim.inputs.model.spec import ModelSpec

    used = set()

    def walk(model):
        for field in model.model_fields.values():
            if quantity_of(field) is not None:
                used.add(quantity_of(field))
            for arg in [field.annotation, *getattr(field.annotation, "__args__", ())]:
                if isinstance(arg, type) and hasattr(arg, "model_fields") and arg is not model:
                    walk(arg)

    for model in (HardwareProfile, EnginePreset, ModelSpec, DaySpec):
        walk(model)
    assert used <= set(plausible_ranges())
    assert {"hbm_gib", "tensor_tflops", "link_latency_us", "gpu_hour_usd", "layers", "chunk_s"} <= used


def test_every_bundled_file_still_loads():
    from sim.inputs.engines.preset import engine_versions, load_engine
    from sim.inputs.hardware import bundled_profiles, load_hardware
    from sim.inputs.model.load import bundled_models, load_model

    assert all(load_hardware(n) for n in bundled_profiles())
    assert all(load_engine(n) for n in engine_versions())
    assert all(load_model(n) for n in bundled_models())
    for path in sorted((ROOT / "tests" / "fixtures" / "hf").glob("*/config.json")):
        if path.parent.name not in ("bad-json", "no-layers"):  # the two broken on purpose
            load_model(str(path))


@pytest.mark.parametrize("path", sorted((ROOT / "hwprofiles").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bundled_hardware_value_times_1000_is_refused(path):
    from sim.inputs.hardware import HardwareProfile

    fields = physical_fields(HardwareProfile, yaml.safe_load(path.read_text()))
    assert len(fields) >= 10
    for dotted, quantity, value in fields:
        assert plausible_check(quantity, value * 1000) is not None, (dotted, value)


def test_a_profile_in_bytes_is_refused_with_the_field_and_the_intended_value(tmp_path):
    from sim.inputs.hardware import load_hardware

    data = yaml.safe_load((ROOT / "hwprofiles" / "h100-sxm.yaml").read_text())
    data["memory"]["hbm_capacity_gib"] = 80 * 2**30
    (tmp_path / "hw.yaml").write_text(yaml.safe_dump(data))
    expected = r"memory\.hbm_capacity_gib: 85899345920 is not plausible .*did you mean 80 GiB"
    with pytest.raises(InputError, match=expected):
        load_hardware(str(tmp_path / "hw.yaml"))


def test_a_config_json_with_a_billion_layers_is_refused_at_once(tmp_path):
    from sim.inputs.model.load import load_model

    config = {"num_hidden_layers": 10**9, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
              "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=r"num_hidden_layers: 1000000000 is not plausible \(allowed 1-1000 layers\)"):
        load_model(str(tmp_path / "config.json"))


def test_a_flag_given_as_text_is_refused():
    from sim.inputs.engines.preset import Overhead

    with pytest.raises(ValueError, match="overlap: must be true or false"):
        Overhead.model_validate({"per_step_us": 1, "per_seq_us": 0, "per_token_us": 0, "overlap": "no"})
    assert Overhead.model_validate({"per_step_us": 1, "per_seq_us": 0, "per_token_us": 0, "overlap": True}).overlap


def test_fleet_facts_and_plan_prices_have_ranges_too():
    from sim.fleet.facts import load_facts
    from sim.planner.candidates import parse_prices

    assert load_facts().hardware["h100-sxm"].price_per_gpu_h.on_demand == 12.29  # the bundled facts load
    with pytest.raises(InputError, match=r"engines\.vllm\.startup_s: 35000 is not plausible .*did you mean 35 s"):
        load_facts({"engines": {"vllm": {"startup_s": 35000, "cuda_graph_capture_s": 17}}})
    with pytest.raises(InputError, match=r"^--price: h100-sxm: 2690 is not plausible .*did you mean 2\.69 USD"):
        parse_prices(["h100-sxm=2690"], ["h100-sxm"])
    assert parse_prices(["h100-sxm=2.69"], ["h100-sxm"]) == {"h100-sxm": 2.69}
