"""Hopper's FP8 dense-GEMM ceiling (`gemm_compute_max_by_dtype.fp8`, derived in calibrate/fp8_ceiling_published.py)
and the per-op ceilings measured at a dtype of their own (`gemm_ceiling_dtype_by_op`); issue 29."""

from __future__ import annotations

import pytest
import yaml
from conftest import smooth_only

from calibrate.fp8_ceiling_published import INPUTS, derived_fp8_ceiling
from sim.cost import CostModel
from sim.errors import InputError
from sim.inputs.efficiency import Efficiency
from sim.inputs.hardware import load_hardware
from sim.inputs.model import load_model
from sim.paths import bundled_dir

HOPPER = ("h100-sxm", "h200", "h800")
PREFILL_TOKENS = 16384  # one long prompt: every projection GEMM is compute-bound at both dtypes


def _profile_without_fp8_entry(tmp_path, name: str):
    data = yaml.safe_load((bundled_dir("hwprofiles") / f"{name}.yaml").read_text())
    del data["efficiency"]["gemm_compute_max_by_dtype"]
    path = tmp_path / f"{name}-no-fp8.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_hardware(str(path))


def _proj_ops(cost: CostModel) -> dict:
    step = cost.breakdown([PREFILL_TOKENS], [0], n_sampled=1)
    return {op.name: op for op in step.ops if op.name.endswith("proj")}


@pytest.mark.parametrize("name", HOPPER)
def test_profile_fp8_ceiling_is_the_published_derivation(name):
    assert load_hardware(name).efficiency.gemm_compute_max_by_dtype["fp8"] == derived_fp8_ceiling()
    assert len(INPUTS) >= 5 and all(0.6 < p.share < 0.85 and p.scaling in ("none", "per-tensor") for p in INPUTS)


def test_fp8_compute_bound_gemm_on_h200_runs_at_peak_times_the_fp8_ceiling():
    hw = smooth_only(load_hardware("h200"))  # the smooth model's formula, not the measured grid
    eff = hw.efficiency
    cost = CostModel(load_model("llama-3-8b"), hw, weight_dtype="fp8")
    ops = _proj_ops(cost)
    assert set(ops) >= {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    fp8_share_of_bf16 = eff.gemm_compute_max_by_dtype["fp8"] / eff.gemm_compute_max
    for name, op in ops.items():
        assert op.bound == "compute"
        hidden = cost.model.hidden_size
        n_out = op.flops / (2.0 * PREFILL_TOKENS * hidden) if name != "down_proj" else hidden
        half_m = eff.gemm_half_tokens + eff.gemm_half_output_elems / n_out
        ceiling = eff.gemm_compute_max_by_op[name] * fp8_share_of_bf16
        ramp = PREFILL_TOKENS / (PREFILL_TOKENS + half_m)
        expected_s = op.flops / (hw.peak_flops("dense_fp8_tflops") * ceiling * ramp)
        assert op.time_s == pytest.approx(expected_s + eff.kernel_launch_us * 1e-6, rel=2e-3), name


@pytest.mark.parametrize("name", HOPPER)
def test_fp8_entry_slows_fp8_gemms_and_leaves_bf16_identical(tmp_path, name):
    model = load_model("llama-3-8b")
    with_entry, without = smooth_only(load_hardware(name)), smooth_only(_profile_without_fp8_entry(tmp_path, name))
    ratio = with_entry.efficiency.gemm_compute_max_by_dtype["fp8"] / with_entry.efficiency.gemm_compute_max
    fp8_new, fp8_old = (_proj_ops(CostModel(model, hw, weight_dtype="fp8")) for hw in (with_entry, without))
    for op_name in fp8_new:  # compute-bound: the time grows as 1 / ratio (launches aside)
        assert fp8_new[op_name].time_s == pytest.approx(fp8_old[op_name].time_s / ratio, rel=5e-3)
        assert fp8_new[op_name].time_s > fp8_old[op_name].time_s
    bf16_new, bf16_old = (CostModel(model, hw).breakdown([PREFILL_TOKENS, 1], [0, 900], n_sampled=2)
                          for hw in (with_entry, without))
    assert bf16_new == bf16_old
    assert with_entry.efficiency.for_weight_dtype("bf16") is with_entry.efficiency


def _eff(**terms) -> Efficiency:
    base = yaml.safe_load((bundled_dir("hwprofiles") / "h100-sxm.yaml").read_text())["efficiency"]
    base.pop("gemm_compute_max_by_dtype", None)
    base.pop("gemm_ceiling_dtype_by_op", None)
    return Efficiency(**{**base, **terms})


def test_per_op_ceiling_measured_at_a_dtype_is_kept_there_and_rescaled_elsewhere():
    eff = _eff(gemm_compute_max=0.75, gemm_compute_max_by_dtype={"fp8": 0.6, "fp4": 0.3},
               gemm_compute_max_by_op={"down_proj": 0.8, "experts_deepgemm": 0.625},
               gemm_ceiling_dtype_by_op={"experts_deepgemm": "fp8"})
    fp8 = eff.for_weight_dtype("fp8")
    assert fp8.gemm_compute_max == 0.6
    assert fp8.gemm_compute_max_by_op == {"down_proj": pytest.approx(0.64), "experts_deepgemm": 0.625}
    fp4 = eff.for_weight_dtype("fp4")
    assert fp4.gemm_compute_max_by_op == {"down_proj": pytest.approx(0.32), "experts_deepgemm": pytest.approx(0.3125)}
    assert eff.for_weight_dtype("bf16") is eff  # no entry: every ceiling as written


@pytest.mark.parametrize("name", ("h100-sxm", "h200"))
def test_hopper_fp8_moe_ceilings_that_are_fp8_figures_stay_unchanged(name):
    eff = load_hardware(name).efficiency
    fp8 = eff.for_weight_dtype("fp8")
    for op in ("experts_ep", "experts_deepgemm"):
        assert fp8.gemm_compute_max_by_op[op] == eff.gemm_compute_max_by_op[op]
    assert fp8.gemm_compute_max_by_op["down_proj"] < eff.gemm_compute_max_by_op["down_proj"]


@pytest.mark.parametrize(("table", "message"), [({"attention": "fp8"}, "unknown GEMM op class"),
                                                ({"experts_ep": "fp9"}, "unknown dtype")])
def test_bad_ceiling_dtype_table_is_one_line(tmp_path, table, message):
    data = yaml.safe_load((bundled_dir("hwprofiles") / "h200.yaml").read_text())
    data["efficiency"]["gemm_ceiling_dtype_by_op"] = table
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=message) as info:
        load_hardware(str(path))
    assert info.value.field == "efficiency.gemm_ceiling_dtype_by_op"
    assert "\n" not in info.value.line()
