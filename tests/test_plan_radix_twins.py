"""Without prefix ids in the workload, a radix candidate replays exactly as its chunked twin, so the
planner searches it once: the twin is skipped with why, and the plan's answer does not change."""

from __future__ import annotations

import numpy as np
from test_plan_verify import SLO, bursty_trace

from sim.inputs.config import EngineConfig
from sim.inputs.workload.trace import Trace
from sim.planner.candidates import build_candidates, drop_radix_twins
from sim.planner.plan import SearchSettings, make_plan
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

BASE = EngineConfig(model="llama-3-8b")


def _candidates(policies, base=BASE):
    return build_candidates(base, ["h100-sxm"], [1, 2], policies)[0]


def test_radix_twins_are_skipped_without_prefix_ids_and_kept_with_them():
    kept, skipped = drop_radix_twins(_candidates(["chunked", "radix"]), has_prefix_ids=False)
    assert [c.cfg.policy for c in kept] == ["chunked", "chunked"]
    assert [(s.tp, s.policy) for s in skipped] == [(1, "radix"), (2, "radix")]
    assert "no prefix ids" in skipped[0].reason
    kept, skipped = drop_radix_twins(_candidates(["chunked", "radix"]), has_prefix_ids=True)
    assert len(kept) == 4 and skipped == []


def test_only_exact_twins_are_dropped():
    lpm = BASE.model_copy(update={"radix_ordering": "lpm"})
    radix_lpm = build_candidates(lpm, ["h100-sxm"], [1], ["radix"])[0]
    assert drop_radix_twins(_candidates(["chunked"])[:1] + radix_lpm, False)[1] == []  # other order: kept
    assert drop_radix_twins(_candidates(["radix"]), False)[1] == []  # no chunked twin to stand for it


def test_the_twin_really_replays_identically():
    """The premise, checked: radix (FCFS) and chunked give the same requests table on a trace
    without prefix ids."""
    trace = bursty_trace()
    trace = Trace(trace.arrival_s[:120], trace.prompt_tokens[:120], trace.output_tokens[:120], source="t")
    frames = [requests_frame(simulate(BASE.model_copy(update={"policy": p}), trace)).drop(columns=["policy"],
                                                                                           errors="ignore")
              for p in ("chunked", "radix")]
    # chunked runs through the fused core, radix through the engine: the same steps, its float sums in
    # another order (tests/test_reference_stepper.py holds the cores to 1e-12 of the clock)
    for column in ("finish_s", "first_token_s"):
        np.testing.assert_allclose(frames[0][column].to_numpy(), frames[1][column].to_numpy(), rtol=1e-12, atol=0)


def test_plan_answer_is_unchanged_and_the_skip_is_reported():
    trace = bursty_trace()
    settings = SearchSettings(max_requests=100)
    both = make_plan(trace, BASE, ["h100-sxm"], [1], ["chunked", "radix"], SLO, 12.0, settings, 1)
    alone = make_plan(trace, BASE, ["h100-sxm"], [1], ["chunked"], SLO, 12.0, settings, 1)
    assert both["recommended"]["replicas"] == alone["recommended"]["replicas"]
    assert both["recommended"]["policy"] == "chunked"
    assert [s["policy"] for s in both["skipped"]] == ["radix"]
