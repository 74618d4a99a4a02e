"""TensorRT-LLM's KV pool (a share of the memory the model leaves) and NVFP4 checkpoint weights."""

from __future__ import annotations

import math

import numpy as np

from sim.inputs.config import EngineConfig
from sim.inputs.engines.preset import kv_pool_share_of_free, load_engine
from sim.inputs.hardware import GIB, load_hardware
from sim.inputs.layout.memory import plan_memory
from sim.inputs.model import load_model
from sim.inputs.model.params import weight_elements_by_group
from sim.inputs.model.weights import weight_bytes_by_group, weight_bytes_per_gpu
from sim.inputs.workload.trace import Trace
from sim.run.simulate import simulate
from sim.run.summary import summarize


def test_share_of_free_is_the_fraction_of_what_weights_activations_and_runtime_leave():
    model, hw = load_model("llama-3.3-70b"), load_hardware("b200")
    kwargs = dict(tp=2, block_size=32, gpu_memory_utilization=0.9, weight_dtype="nvfp4", kv_dtype="fp8",
                  max_num_batched_tokens=2048, max_num_seqs=512)
    plan = plan_memory(model, hw, share_of_free=True, **kwargs)
    left = (hw.hbm_bytes - plan.runtime_reserve_bytes_per_gpu - plan.weight_bytes_per_gpu
            - plan.activation_reserve_bytes_per_gpu)
    assert plan.num_gpu_blocks == int(left * 0.9) // (32 * plan.kv_bytes_per_token_per_gpu)
    share_of_hbm = plan_memory(model, hw, **kwargs)  # 0.9 of all HBM minus the same terms: a smaller pool here
    assert share_of_hbm.num_gpu_blocks < plan.num_gpu_blocks
    assert plan_memory(model, hw, share_of_free=True, **{**kwargs, "gpu_memory_utilization": 0.5}).num_gpu_blocks \
        < plan.num_gpu_blocks


def test_only_the_trtllm_preset_sizes_kv_from_free_memory():
    assert load_engine("trtllm").scheduling.kv_pool == "share_of_free"
    assert kv_pool_share_of_free("trtllm")
    assert not kv_pool_share_of_free("vllm") and not kv_pool_share_of_free("sglang")
    assert not kv_pool_share_of_free(None)


def test_trtllm_simulation_gets_the_free_memory_pool():
    cfg = EngineConfig(engine="trtllm", model="llama-3.3-70b", hardware="b200", tp=4, weight_dtype="nvfp4",
                       kv_dtype="fp8", max_num_seqs=64, max_num_batched_tokens=2048)
    model, hw = load_model("llama-3.3-70b"), load_hardware("b200")
    expected = plan_memory(model, hw, 4, cfg.block_size, cfg.gpu_memory_utilization, "nvfp4", "fp8", 2048, 64,
                           share_of_free=True).num_gpu_blocks
    trace = Trace(np.zeros(2), np.full(2, 64), np.full(2, 4), source="test")
    assert summarize(simulate(cfg, trace))["num_gpu_blocks"] == expected


def test_nvfp4_checkpoint_keeps_embedding_and_lm_head_bf16():
    """ModelOpt NVFP4 (nvidia/Llama-3.3-70B-Instruct-FP4): linear layers e2m1 + an e4m3 scale per 16
    values (0.5625 B), embedding and LM head (exclude_modules lm_head) bf16."""
    model = load_model("llama-3.3-70b")
    elements = weight_elements_by_group(model, 1)
    by_group = weight_bytes_by_group(model, 1, "nvfp4")
    assert by_group["embedding"] == elements["embedding"] * 2
    assert by_group["attention"] == math.ceil(elements["attention"] * 0.5625)
    assert by_group["dense_mlp"] == math.ceil(elements["dense_mlp"] * 0.5625)
    total_gib = weight_bytes_per_gpu(model, 1, "nvfp4") / GIB
    assert 39 < total_gib < 41  # the checkpoint's ~42.7 GB, vs 32.9 GiB if every weight were plain fp4
    assert weight_bytes_per_gpu(model, 1, "fp4") / GIB < 33
