"""The TensorRT-LLM MoE (B200) and RTX PRO 6000 perf-overview rows run ModelOpt NVFP4 checkpoints
(nvidia/*-FP4): their weight dtype is `nvfp4` (block scales counted, linear layers only), as the dense rows."""

from __future__ import annotations

import math

from calibrate.trtllm_experts_ceiling import fit_rows
from sim.inputs.model import load_model
from sim.inputs.model.params import weight_elements_by_group
from sim.inputs.model.weights import weight_bytes_by_group
from sim.validate.cases import bundled_case_files, load_cases

FILES = ("trtllm_perf_overview_moe_v1.0.csv", "trtllm_perf_overview_rtx_pro_6000.csv")


def fp4_rows():
    paths = [p for p in bundled_case_files() if p.name in FILES]
    assert len(paths) == len(FILES)
    return [c for c in load_cases(paths) if "fp4" in c.weight_dtype]


def test_moe_and_rtx_fp4_rows_are_nvfp4_checkpoints():
    rows = fp4_rows()
    assert len(rows) >= 60
    assert {c.weight_dtype for c in rows} == {"nvfp4"}


def test_nvfp4_moe_experts_carry_block_scales_and_router_stays_bf16():
    model = load_model("qwen3-30b-a3b")
    elements = weight_elements_by_group(model, 1)
    nvfp4 = weight_bytes_by_group(model, 1, "nvfp4")
    assert nvfp4["experts"] == math.ceil(elements["experts"] * 0.5625)  # e2m1 + one e4m3 scale per 16
    assert nvfp4["router"] == elements["router"] * 2
    assert nvfp4["embedding"] == elements["embedding"] * 2
    assert sum(nvfp4.values()) > 1.1 * sum(weight_bytes_by_group(model, 1, "fp4").values())


def test_one_gpu_experts_fit_reads_only_split_fit_single_gpu_rows():
    rows = fit_rows("b200")
    assert len(rows) == 10
    assert all(c.split == "fit" and c.tp == 1 and c.weight_dtype == "nvfp4" for c in rows)
