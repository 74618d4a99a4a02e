"""Which CUDA-graph sizes a run captures, given its max_num_seqs / max_num_batched_tokens, and the
size a decode batch of N then runs at (TensorRT-LLM 1.0's rule: sizes above min(max_batch_size,
max_num_tokens) dropped, that cap captured in their place; vLLM V1's: sizes <= 2 x max_num_seqs)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from sim.errors import InputError
from sim.inputs.engines import EngineCost, EngineOverhead, load_engine
from sim.inputs.engines.overhead import captured_sizes
from sim.inputs.engines.preset import CudaGraph
from tests.test_engines import LinearGpu

PERF_OVERVIEW = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192]


def _trtllm(max_num_seqs: int, max_num_batched_tokens: int = 8192) -> EngineOverhead:
    return EngineOverhead.from_preset(load_engine("trtllm@1.0"), max_num_seqs=max_num_seqs,
                                      max_num_batched_tokens=max_num_batched_tokens)


def test_trtllm_drops_sizes_above_max_batch_size_and_captures_it_instead():
    over = _trtllm(768)
    assert over.capture_sizes == (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768)
    # a batch of 680 pads to the captured max batch size, not to the listed 1024
    assert [over.padded_size(n) for n in (300, 500, 513, 680, 768)] == [384, 512, 768, 768, 768]


def test_trtllm_max_batch_size_already_listed_is_not_added_twice():
    assert _trtllm(1024).capture_sizes[-2:] == (512, 1024)
    assert _trtllm(4096).capture_sizes[-1] == 4096


def test_trtllm_cap_is_the_token_budget_when_that_is_smaller():
    over = _trtllm(3840, max_num_batched_tokens=2048)
    assert over.capture_sizes[-1] == 2048 and over.padded_size(1500) == 2048
    assert _trtllm(3000, max_num_batched_tokens=2176).capture_sizes[-2:] == (2048, 2176)


def test_without_the_run_limits_the_listed_sizes_stand():
    over = EngineOverhead.from_preset(load_engine("trtllm@1.0"))
    assert list(over.capture_sizes) == PERF_OVERVIEW


def test_without_capture_cap_a_batch_above_the_largest_kept_size_runs_eager():
    """TensorRT-LLM 0.19 (before NVIDIA/TensorRT-LLM PR #4843): sizes above the cap are dropped, none added."""
    graph = CudaGraph(capture_sizes=PERF_OVERVIEW, max_per_seq=1, within_token_budget=True)
    over = EngineOverhead.from_preset(load_engine("trtllm@1.0").model_copy(update={"cuda_graph": graph}),
                                      max_num_seqs=768, max_num_batched_tokens=8192)
    assert over.capture_sizes[-1] == 512 and over.padded_size(680) == 680


def test_a_cap_below_every_listed_size_captures_only_the_cap():
    graph = CudaGraph(capture_sizes=[64, 128], max_per_seq=1, capture_cap=True)
    assert captured_sizes(graph, max_num_seqs=48) == (48,)
    assert captured_sizes(CudaGraph(capture_sizes=[64, 128], max_per_seq=1), max_num_seqs=48) == ()


def test_vllm_presets_keep_their_rule():
    for name in ("vllm@0.15", "vllm@0.10"):
        preset = load_engine(name)
        for seqs, tokens in ((128, 64), (1024, 256), (200, 8192)):
            sizes = EngineOverhead.from_preset(preset, max_num_seqs=seqs, max_num_batched_tokens=tokens).capture_sizes
            assert sizes == tuple(s for s in preset.cuda_graph.capture_sizes if s <= 2 * seqs)
    sglang = load_engine("sglang@0.4")
    assert EngineOverhead.from_preset(sglang, max_num_seqs=8, max_num_batched_tokens=8).capture_sizes == \
        tuple(sglang.cuda_graph.capture_sizes)


def test_padding_cost_follows_the_captured_cap():
    cost = EngineCost(LinearGpu(), _trtllm(768))
    q, c = np.ones(680, dtype=np.int64), np.full(680, 100, dtype=np.int64)
    assert cost.gpu_step_time_s(q, c, 680) == pytest.approx(0.010 + 2 * (768 - 680) * 1e-6)


def test_capture_cap_without_a_cap_is_refused(tmp_path):
    data = load_engine("trtllm@1.0").model_dump()
    data["cuda_graph"].update(max_per_seq=None, within_token_budget=False, capture_cap=True)
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="capture_cap needs a cap"):
        load_engine(str(path))
    data["cuda_graph"]["capture_max"] = True
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="unknown field"):
        load_engine(str(path))
