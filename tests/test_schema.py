"""sim.schema.StrictModel: booleans only where booleans belong, finite floats, unknown keys refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sim.inputs.config import EngineConfig
from sim.inputs.hardware import load_hardware
from sim.inputs.workload.spec_models import Transforms, WorkloadSpec


def test_booleans_are_accepted_in_boolean_fields():
    cfg = EngineConfig.model_validate({"radix_chunked": False, "record_steps": True})
    assert cfg.radix_chunked is False and cfg.record_steps is True
    assert WorkloadSpec.model_validate({"trace": "x.csv", "keep_failed": True}).keep_failed is True


@pytest.mark.parametrize(("model", "data"), [
    (EngineConfig, {"tp": True}),
    (EngineConfig, {"max_model_len": False}),  # int | None
    (EngineConfig, {"gpu_memory_utilization": True}),
    (EngineConfig, {"replica_hardware": [True]}),
    (EngineConfig, {"slo": {"ttft_s": True}}),  # nested model
    (Transforms, {"time_window_s": [0, True]}),  # inside a tuple
])
def test_booleans_are_refused_where_numbers_go(model, data):
    with pytest.raises(ValidationError, match="true/false|valid string"):
        model.model_validate(data)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_floats_are_refused(value):
    with pytest.raises(ValidationError, match="finite"):
        EngineConfig.model_validate({"swap_space": value})


def test_bundled_profiles_pass_the_paged_attention_checks():
    table = load_hardware("h100-sxm").efficiency.paged_attention_memory
    assert table and all(size & (size - 1) == 0 and 0 < value <= 1 for size, value in table.items())
