"""The handoff between prefill and decode replicas: pick a decode replica (the decode router),
reserve blocks there, move the KV over the link, then free it on the prefill side.

Timeline of a request: its prefill step ends (first token) -> queued for blocks on the chosen
decode replica (under `reserve_full`, until its whole prompt + output fits there) -> blocks taken
there, transfer starts when the prefill replica's link is free -> lands after latency + bytes /
bandwidth -> prefill blocks (and reservation) freed, the request joins the decode batch.
`kv_transfer_s` in the requests table spans the whole of it (handoff to landing).
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from sim.engine.disagg.link import KVLink

if TYPE_CHECKING:
    import simpy

    from sim.engine.replica import Replica
    from sim.engine.request import RequestTable
    from sim.engine.routers.simple import Router


class Coordinator:
    def __init__(self, env: simpy.Environment, table: RequestTable, link: KVLink, router: Router, attribution):
        self.env, self.table, self.link, self.router, self.attribution = env, table, link, router, attribution
        self.prefill: list[Replica] = []
        self.decode: list[Replica] = []
        self._queues: dict[int, deque] = {}
        self._incoming: dict[int, int] = {}
        self._link_free_s: dict[int, float] = {}
        self._landings: list[float] = []
        self.n_transfers = 0
        self.bytes_moved = 0.0
        self.wire_s = 0.0  # sum over transfers of latency + bytes / bandwidth
        self.wait_s = 0.0  # sum over transfers of time queued for decode blocks or the link

    def attach(self, prefill: list[Replica], decode: list[Replica]) -> None:
        self.prefill, self.decode = prefill, decode
        self._replicas = {replica.sched.replica: replica for replica in (*prefill, *decode)}
        for replica in prefill:
            replica.sched.coordinator = self
            self._link_free_s[replica.sched.replica] = 0.0
        for replica in decode:
            replica.sched.coordinator = self
            self._queues[replica.sched.replica] = deque()
            self._incoming[replica.sched.replica] = 0

    def n_in_flight(self, sched) -> int:
        """Transfers to `sched` on the wire: their blocks are reserved there and they will land."""
        return self._incoming[sched.replica] - len(self._queues[sched.replica])

    def handoff(self, prefill_sched, rid: int, now_s: float) -> None:
        """`rid` finished its prefill on `prefill_sched`: choose a decode replica and queue the move."""
        target = self.decode[self.router.pick(rid, self.decode, now_s)].sched
        reason = target.never_fits(rid)
        if reason is not None:
            prefill_sched.release_handed_off(rid)
            prefill_sched._reject(rid, f"decode replica {target.replica}: {reason}", now_s)
            return
        self._queues[target.replica].append((rid, prefill_sched, now_s))
        self._incoming[target.replica] += 1
        self.start_transfers(target)

    def start_transfers(self, decode_sched) -> None:
        """Start the queued transfers to `decode_sched` whose blocks fit there now (in order)."""
        queue = self._queues[decode_sched.replica]
        t, now_s = self.table, self.env.now
        while queue:
            rid, prefill_sched, since_s = queue[0]
            if not decode_sched.take_transfer_blocks(rid, int(t.n_computed[rid])):
                break
            queue.popleft()
            n_bytes = len(prefill_sched.blocks.table(rid)) * prefill_sched.blocks.block_size * _kv_bytes_per_token(
                prefill_sched.cost)
            start_s = max(now_s, self._link_free_s[prefill_sched.replica])
            wire_s = self.link.transfer_s(n_bytes)
            land_s = start_s + wire_s
            self._link_free_s[prefill_sched.replica] = land_s
            self._landings.append(land_s)
            self.n_transfers += 1
            self.bytes_moved += n_bytes
            self.wire_s += wire_s
            self.wait_s += start_s - since_s
            self.env.process(self._land(rid, prefill_sched, decode_sched, since_s, land_s))

    def _land(self, rid: int, prefill_sched, decode_sched, since_s: float, land_s: float):
        yield self.env.timeout(land_s - self.env.now)
        self._landings.remove(land_s)
        prefill_sched.release_handed_off(rid)
        self.table.kv_transfer_s[rid] += self.env.now - since_s
        if self.attribution is not None:
            self.attribution.landed(rid, self.env.now)
        self._incoming[decode_sched.replica] -= 1
        decode_sched.accept_transfer(rid)
        self._replicas[prefill_sched.replica].wake()
        self._replicas[decode_sched.replica].wake()

    def horizon_s(self, now_s: float) -> float:
        """Earliest moment a request could still join a decode replica (a lower bound): the next
        landing, or the end of a prefill step in flight, or now if a prefill replica with work has
        not planned its step yet. Decode runs stop there, so they equal single steps."""
        horizon = min(self._landings) if self._landings else math.inf
        for replica in self.prefill:
            sched = replica.sched
            if sched.busy_until_s > now_s:
                horizon = min(horizon, sched.busy_until_s)
            elif sched.has_work():
                return now_s
        return horizon

    def summary(self) -> dict:
        n = self.n_transfers
        return {"n_transfers": n, "bytes_moved": self.bytes_moved,
                "wire_s_mean": self.wire_s / n if n else None, "wait_s_mean": float(self.wait_s) / n if n else None,
                "link_kind": self.link.kind, "link_gb_s": self.link.bytes_s / 1e9,
                "link_latency_us": self.link.latency_s * 1e6, "link_parallel_pairs": self.link.n_parallel}


def _kv_bytes_per_token(cost) -> float:
    """The whole model's KV bytes per token (every layer, every TP shard)."""
    return cost.kv_bytes_per_token_layer_gpu * cost.model.n_layers * getattr(cost, "tp", 1)


class DecodeHorizon:
    """What a decode replica's engine loop sees as its arrival source: the run's own next arrival
    or the coordinator's horizon, whichever is earlier."""

    replica_blind = True  # the same for every decode replica (sim.engine.lockstep asks it once per group)

    def __init__(self, env: simpy.Environment, source, coordinator: Coordinator):
        self.env, self.source, self.coordinator = env, source, coordinator
        self.reacts_to_completions = source.reacts_to_completions

    def next_arrival_s(self, replica: int | None = None) -> float:
        return min(self.source.next_arrival_s(), self.coordinator.horizon_s(self.env.now))
