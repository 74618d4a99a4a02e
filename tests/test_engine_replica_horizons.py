"""Per-replica horizons: with a router that decides every arrival up front (round robin, random), a
replica's decode runs are cut only by its own arrivals, so each replica of a cluster runs exactly as
it would alone on its share of the trace: the same times to the bit, since arrivals land at their exact
trace times (`sim.engine.replica.delay_until`) whatever arrived before on other replicas."""

from __future__ import annotations

import numpy as np
import pytest

import sim.engine.replica as engine
from sim.inputs.config import EngineConfig
from sim.run.invoke import load_run_workload
from sim.run.simulate import simulate
from sim.run.summary import requests_frame

TIME_COLUMNS = ("scheduled_s", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2e_s", "attr_decode_s")


@pytest.fixture(scope="module")
def workload():
    return load_run_workload("splitwise_conv", rate_scale=8, max_requests=400)


def count_plans(monkeypatch) -> list[int]:
    """Plans committed, per replica index, while the run goes."""
    counts: list[int] = []
    original = engine.Replica.__init__

    def counting_init(self, env, sched, source, **kwargs):
        original(self, env, sched, source, **kwargs)
        counts.append(0)
        commit = sched.commit

        def counted(plan, end_s, index=len(counts) - 1):
            counts[index] += 1
            return commit(plan, end_s)

        sched.commit = counted

    monkeypatch.setattr(engine.Replica, "__init__", counting_init)
    return counts


@pytest.mark.parametrize("router", ["round_robin", "random"])
def test_each_replica_runs_as_it_would_alone_on_its_share(workload, monkeypatch, router):
    cfg = EngineConfig(policy="chunked", replicas=3, router=router, seed=4)
    counts = count_plans(monkeypatch)
    cluster = simulate(cfg, workload)
    frame = requests_frame(cluster)
    cluster_plans = list(counts)
    for replica in range(3):
        rows = np.flatnonzero(frame.replica.to_numpy() == replica)
        counts.clear()
        alone = simulate(cfg.model_copy(update={"replicas": 1}), workload.take(rows), core="engine")
        alone_frame = requests_frame(alone)
        # cut only where its own arrivals cut it: as many plans as alone (others' arrivals would add more)
        assert counts == [cluster_plans[replica]]
        mine = frame.iloc[rows].reset_index(drop=True)
        assert (mine.status.to_numpy() == alone_frame.status.to_numpy()).all()
        assert (mine.output_tokens.to_numpy() == alone_frame.output_tokens.to_numpy()).all()
        for column in TIME_COLUMNS:
            np.testing.assert_array_equal(mine[column].to_numpy(), alone_frame[column].to_numpy(), err_msg=column)


def test_a_state_reading_router_keeps_the_global_horizon(workload, monkeypatch):
    """least_outstanding may send the next arrival anywhere: every replica's runs stop at it, so the
    cluster commits more plans than its replicas would alone."""
    cfg = EngineConfig(policy="chunked", replicas=3, router="least_outstanding")
    counts = count_plans(monkeypatch)
    frame = requests_frame(simulate(cfg, workload))
    cluster_plans = sum(counts)
    alone_plans = 0
    for replica in range(3):
        counts.clear()
        simulate(cfg.model_copy(update={"replicas": 1}),
                 workload.take(np.flatnonzero(frame.replica.to_numpy() == replica)), core="engine")
        alone_plans += counts[0]
    assert cluster_plans > alone_plans
