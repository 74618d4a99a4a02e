"""Hardware profiles: every bundled YAML validates; bad YAMLs fail with one precise InputError."""

from __future__ import annotations

from itertools import pairwise

import pytest
import yaml

from sim.errors import InputError
from sim.inputs.hardware import GIB, bundled_profiles, load_hardware
from sim.paths import bundled_dir

REQUIRED_PROFILES = {
    "h100-sxm", "h100-pcie", "h200", "a100-80g-sxm", "a100-80g-pcie", "l40s", "b200", "mi300x",
}


def write_profile(tmp_path, mutate) -> str:
    """A copy of the bundled h100-sxm YAML, changed by `mutate(dict)`, written under tmp_path."""
    data = yaml.safe_load((bundled_dir("hwprofiles") / "h100-sxm.yaml").read_text())
    mutate(data)
    path = tmp_path / "my-gpu.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_every_required_profile_is_bundled():
    assert set(bundled_profiles()) >= REQUIRED_PROFILES


@pytest.mark.parametrize("name", bundled_profiles())
def test_bundled_profile_loads_with_sane_numbers(name):
    hw = load_hardware(name)
    assert hw.name == name
    assert hw.provenance.strip(), "every profile names its sources"
    assert 40 <= hw.memory.hbm_capacity_gib <= 300
    assert 500 <= hw.memory.hbm_bandwidth_gb_s <= 10_000
    assert 100 <= hw.compute.dense_bf16_tflops <= 5_000
    if hw.compute.dense_fp8_tflops is not None:
        assert hw.compute.dense_fp8_tflops > hw.compute.dense_bf16_tflops
    assert 0 < hw.memory.runtime_reserve_gib < hw.memory.hbm_capacity_gib
    assert hw.hbm_bytes == pytest.approx(hw.memory.hbm_capacity_gib * GIB)
    assert hw.hbm_bandwidth_bytes_s == pytest.approx(hw.memory.hbm_bandwidth_gb_s * 1e9)


def test_h100_sxm_datasheet_numbers():
    hw = load_hardware("h100-sxm")
    assert hw.compute.dense_bf16_tflops == pytest.approx(989.4, rel=0.01)
    assert hw.memory.hbm_bandwidth_gb_s == pytest.approx(3350, rel=0.01)
    assert hw.peak_flops("dense_bf16_tflops") == pytest.approx(989.4e12, rel=0.01)


def test_profile_by_path_equals_profile_by_name():
    path = bundled_dir("hwprofiles") / "h200.yaml"
    assert load_hardware(str(path)) == load_hardware("h200")


def test_user_profile_loads(tmp_path):
    def rename(data):
        data["name"] = "my-gpu"
        data["memory"]["hbm_bandwidth_gb_s"] = 1234.0

    hw = load_hardware(write_profile(tmp_path, rename))
    assert hw.name == "my-gpu" and hw.hbm_bandwidth_bytes_s == pytest.approx(1.234e12)


def test_unknown_profile_name_lists_the_bundled_ones():
    with pytest.raises(InputError) as info:
        load_hardware("h1000")
    assert info.value.where == "--hardware"
    assert "h1000" in info.value.allowed and "h100-sxm" in info.value.allowed


def test_missing_profile_file(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_hardware(str(tmp_path / "nope.yaml"))


def _negative_bandwidth(data):
    data["memory"]["hbm_bandwidth_gb_s"] = -3350


def _missing_bandwidth(data):
    del data["memory"]["hbm_bandwidth_gb_s"]


def _missing_efficiency(data):
    del data["efficiency"]


def _efficiency_above_one(data):
    data["efficiency"]["memory"] = 1.3


def _unknown_key(data):
    data["compute"]["dense_fp6_tflops"] = 9000


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (_negative_bandwidth, "memory.hbm_bandwidth_gb_s"),
        (_missing_bandwidth, "memory.hbm_bandwidth_gb_s"),
        (_missing_efficiency, "efficiency"),
        (_efficiency_above_one, "efficiency.memory"),
        (_unknown_key, "compute.dense_fp6_tflops"),
    ],
)
def test_bad_profile_names_file_and_field(tmp_path, mutate, field):
    path = write_profile(tmp_path, mutate)
    with pytest.raises(InputError) as info:
        load_hardware(path)
    err = info.value
    assert err.where == path and err.field == field
    assert "\n" not in err.line()


def test_profile_that_is_not_yaml_mapping(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_hardware(str(broken))
    listing = tmp_path / "list.yaml"
    listing.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="mapping"):
        load_hardware(str(listing))


def test_missing_fp8_peak_is_an_input_error():
    hw = next(load_hardware(n) for n in bundled_profiles() if load_hardware(n).compute.dense_fp8_tflops is None)
    with pytest.raises(InputError) as info:
        hw.peak_flops("dense_fp8_tflops")
    assert info.value.field == "compute.dense_fp8_tflops"


def test_paged_efficiency_interpolates_between_calibrated_sizes():
    eff = load_hardware("h100-sxm").efficiency
    table = eff.paged_attention_memory
    sizes = sorted(table)
    for size in sizes:
        assert eff.paged_efficiency(size) == pytest.approx(table[size])
    for low, high in pairwise(sizes):
        mid = eff.paged_efficiency((low + high) // 2)
        assert min(table[low], table[high]) <= mid <= max(table[low], table[high])
    assert eff.paged_efficiency(1) == pytest.approx(table[sizes[0]])  # clamps below the table
    assert eff.paged_efficiency(4096) == pytest.approx(table[sizes[-1]])  # and above it


def _fp4_ceiling(value):
    def mutate(data):
        data["compute"]["dense_fp4_tflops"] = 4 * data["compute"]["dense_bf16_tflops"]
        data["efficiency"]["gemm_compute_max_by_dtype"] = {"fp4": value}
    return mutate


def test_gemm_ceiling_by_dtype_replaces_gemm_compute_max_for_that_dtype_only(tmp_path):
    hw = load_hardware(write_profile(tmp_path, _fp4_ceiling(0.3)))
    assert hw.efficiency.for_weight_dtype("fp4").gemm_compute_max == 0.3
    assert hw.efficiency.for_weight_dtype("bf16") is hw.efficiency
    assert hw.efficiency.for_weight_dtype("fp8").gemm_compute_max == hw.efficiency.gemm_compute_max


def test_gemm_ceiling_by_dtype_slows_compute_bound_gemms_of_that_dtype(tmp_path):
    from sim.cost import CostModel
    from sim.inputs.model import load_model

    model = load_model("llama-3-8b")
    plain = load_hardware(write_profile(tmp_path, _fp4_ceiling(1.0)))
    lowered_path = tmp_path / "lowered"
    lowered_path.mkdir()
    lowered = load_hardware(write_profile(lowered_path, _fp4_ceiling(0.3)))
    prefill = ([4096], [0])
    t_plain = CostModel(model, plain, weight_dtype="fp4").breakdown(*prefill, n_sampled=1)
    t_lowered = CostModel(model, lowered, weight_dtype="fp4").breakdown(*prefill, n_sampled=1)
    gemm = {op.name: op.time_s for op in t_plain.ops if op.name.endswith("proj")}
    gemm_lowered = {op.name: op.time_s for op in t_lowered.ops if op.name.endswith("proj")}
    assert gemm and all(gemm_lowered[name] > 2 * gemm[name] for name in gemm)  # compute-bound: ~1/0.3 slower
    bf16 = [CostModel(model, hw).breakdown(*prefill, n_sampled=1).time_s for hw in (plain, lowered)]
    assert bf16[0] == bf16[1]


@pytest.mark.parametrize(("table", "message"), [({"fp5": 0.4}, "unknown dtype"), ({"fp4": 1.5}, "must be in")])
def test_bad_gemm_ceiling_by_dtype_is_one_line(tmp_path, table, message):
    path = write_profile(tmp_path, lambda data: data["efficiency"].update(gemm_compute_max_by_dtype=table))
    with pytest.raises(InputError, match=message) as info:
        load_hardware(path)
    assert info.value.field == "efficiency.gemm_compute_max_by_dtype"
    assert "\n" not in info.value.line()


def test_gemm_ceiling_by_dtype_scales_per_op_ceilings(tmp_path):
    def mutate(data):
        _fp4_ceiling(0.36)(data)
        data["efficiency"]["gemm_compute_max"] = 0.72
        data["efficiency"]["gemm_compute_max_by_op"] = {"down_proj": 0.6}

    eff = load_hardware(write_profile(tmp_path, mutate)).efficiency.for_weight_dtype("fp4")
    assert eff.gemm_compute_max == 0.36
    assert eff.gemm_compute_max_by_op == {"down_proj": pytest.approx(0.3)}
