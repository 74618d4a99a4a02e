"""Seeded random configurations on real trace slices: every run either refuses its input with one
InputError or ends with every request finished or rejected (`simulate` raises "the simulation
stalled" otherwise). A broader run of this found a disaggregated decode replica that waited forever
on a transfer queued for its own blocks. Clusters whose replicas can run apart also run split
(sim.run.replica_split, in this process) and must give the same requests frame and summary."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from sim.engine.request import Status
from sim.errors import InputError
from sim.inputs.config import EngineConfig
from sim.inputs.workload.spec_models import Synthetic
from sim.inputs.workload.synthetic.generate import generate_synthetic
from sim.run.invoke import load_run_workload
from sim.run.replica_split import simulate_split, why_not_split
from sim.run.simulate import simulate
from sim.run.summary import requests_frame, summarize

N_CONFIGS = 40


@pytest.fixture(scope="module")
def traces():
    samples = Synthetic.model_validate({"arrival": {"kind": "poisson", "rate_qps": 20.0},
                                        "lengths": {"trace": "sharegpt"}, "n_requests": 80,
                                        "n_samples": {"kind": "uniform", "low": 1, "high": 3}})
    return {"splitwise": load_run_workload("splitwise_conv", rate_scale=6, max_requests=100),
            "mooncake": load_run_workload("mooncake_conversation", rate_scale=0.25, max_requests=40),
            "samples": generate_synthetic(samples, 1)}


def random_knobs(rng: random.Random, trace_name: str) -> dict:
    """Tight caches, small budgets and chunk caps, with the features that move requests around."""
    policy = rng.choice(["continuous", "chunked", "radix", "static"])
    knobs = dict(policy=policy, preemption_mode=rng.choice(["recompute", "swap"]),
                 num_gpu_blocks_override=rng.choice([60, 100, 150, 300, 600]), max_num_seqs=rng.choice([4, 16, 256]),
                 block_size=rng.choice([8, 16, 32]), max_num_batched_tokens=rng.choice([256, 512, 2048]),
                 seed=rng.randrange(100))
    if policy == "static":  # it reserves max_model_len per request: keep that within the cache
        knobs["max_model_len"] = rng.choice([256, 512])
    elif trace_name == "mooncake":
        knobs["max_model_len"] = 131072
    if policy in ("chunked", "radix") and rng.random() < 0.5:
        knobs["chunk_size"] = rng.choice([16, 32, 64])
    if policy == "radix" and rng.random() < 0.3:
        knobs["cpu_cache_gib"] = 1.0
    if policy != "static" and rng.random() < 0.2:
        knobs.update(spec_tokens=2, spec_acceptance=[0.6])
    if policy != "static" and trace_name != "samples" and "spec_tokens" not in knobs and rng.random() < 0.3:
        knobs.update(prefill_replicas=rng.choice([1, 2]), decode_replicas=rng.choice([1, 2]))
    elif rng.random() < 0.3:
        knobs.update(replicas=rng.choice([2, 3]),
                     router=rng.choice(["round_robin", "random", "least_outstanding", "least_kv", "prefix_affinity"]))
    if rng.random() < 0.2:
        knobs["engine"] = rng.choice(["vllm", "sglang"])
    return knobs


def same_when_split(cfg: EngineConfig, trace, whole) -> bool:
    split = simulate_split(cfg, trace, lambda fn, tasks: ((i, fn(*tasks[i])) for i in range(len(tasks))))
    whole_frame, split_frame = requests_frame(whole), requests_frame(split)
    whole_summary, split_summary = summarize(whole, whole_frame), summarize(split, split_frame)
    whole_summary.pop("wall_time_s"), split_summary.pop("wall_time_s")
    return whole_frame.equals(split_frame) and repr(whole_summary) == repr(split_summary)


def test_random_configurations_end_every_request(traces):
    ran = preempted = split = 0
    for case in range(N_CONFIGS):
        rng = random.Random(case)
        trace_name = rng.choice(sorted(traces))
        knobs = random_knobs(rng, trace_name)
        try:
            cfg = EngineConfig(**knobs)
            result = simulate(cfg, traces[trace_name])
        except (InputError, ValidationError) as refused:  # refused by the input checks, with a reason
            assert str(refused), knobs
            continue
        assert set(result.table.status.tolist()) <= {Status.FINISHED, Status.REJECTED}, knobs
        ran += 1
        preempted += result.recorder.preemptions > 0
        if why_not_split(cfg, traces[trace_name]) is None:
            assert same_when_split(cfg, traces[trace_name], result), knobs
            split += 1
    assert ran >= 36 and preempted >= 15  # the draws really run, and under block pressure
    assert split >= 3
