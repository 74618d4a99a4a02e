"""Chunked prefill looks only at rows that joined the batch since they were last seen decoding
(`Scheduler.split_decoding`): at every call, on every path that puts rows into the running batch
(admission, recompute and swap after preemption, prefix hits, parallel samples, KV landing on a
decode replica), it must give what looking at every row gives."""

from __future__ import annotations

import numpy as np
import pytest

from sim.engine.sched.base import Scheduler
from sim.inputs.config import EngineConfig
from sim.inputs.workload.spec_models import Synthetic
from sim.inputs.workload.synthetic.generate import generate_synthetic
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate

CASES = [
    ("splitwise", {"policy": "chunked", "num_gpu_blocks_override": 500, "max_num_batched_tokens": 512}),
    ("splitwise", {"policy": "chunked", "num_gpu_blocks_override": 500, "preemption_mode": "swap", "chunk_size": 128}),
    ("splitwise", {"policy": "chunked", "prefill_replicas": 1, "decode_replicas": 1, "chunk_size": 128}),
    ("mooncake", {"policy": "radix", "max_model_len": 131072, "num_gpu_blocks_override": 4000}),
    ("samples", {"policy": "chunked", "num_gpu_blocks_override": 300, "chunk_size": 64}),
]


def workload(name: str):
    if name == "splitwise":
        return load_run_workload("splitwise_conv", rate_scale=6, max_requests=300)
    if name == "mooncake":
        return load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=80)
    spec = Synthetic.model_validate({"arrival": {"kind": "poisson", "rate_qps": 20.0}, "lengths": {"trace": "sharegpt"},
                                     "n_requests": 200, "n_samples": {"kind": "uniform", "low": 1, "high": 4}})
    return generate_synthetic(spec, 3)


@pytest.mark.parametrize(("name", "knobs"), CASES)
def test_split_decoding_matches_looking_at_every_row(monkeypatch, name, knobs):
    fast = Scheduler.split_decoding
    calls = {"n": 0, "with_prefill": 0}

    def checked(self, ids):
        result = fast(self, ids)
        assert result == self._split_rows(list(ids))
        calls["n"] += 1
        calls["with_prefill"] += bool(result[1])
        return result

    monkeypatch.setattr(Scheduler, "split_decoding", checked)
    result = simulate(EngineConfig(**knobs), workload(name), core="engine")
    assert calls["n"] > 100 and calls["with_prefill"] > 10
    if "num_gpu_blocks_override" in knobs and name != "mooncake":
        assert result.recorder.preemptions > 0
    assert np.isfinite(result.table.finish_s).all()  # every request ended (finished or rejected)
    if name == "samples":
        assert result.table.children
