"""The day's arrivals, chunk by chunk, into the fleet; and the horizons replicas plan up to.

A replica's decode run never goes past `next_arrival_s`: the next arrival (anywhere: the router
reads every replica's state at each arrival), or the next fleet event (an autoscaler decision, a
replica becoming ready, a failure), whichever is first, so whoever reads a replica at those times
sees it as a step-by-step run would leave it. Runs past finishes stay off (the router reads).
"""

from __future__ import annotations

import heapq
import math


class DaySource:
    reacts_to_completions = False

    def __init__(self, env, generator, table, tally):
        self.env, self.generator, self.table, self.tally = env, generator, table, tally
        self.fleet = None  # set by the runner
        self.minute_tally = None  # a per-minute Tally too, when the spec asks
        self._chunks = generator.chunks()
        self._times: list[float] = []
        self._prompt: list[int] = []
        self._output: list[int] = []
        self._pos = 0
        self._chunk_end_s = math.inf
        self._events: list[float] = []  # heap of fleet event times
        self._to_release: list[int] = []
        self.n_arrived = 0
        self.n_open = 0  # arrived and not yet ended
        self.arrivals_done = False
        self._load_next_chunk()

    def _load_next_chunk(self) -> None:
        self._pos = 0
        for chunk in self._chunks:
            if chunk.arrival_s.shape[0]:
                self._times, self._chunk_end_s = chunk.arrival_s.tolist(), chunk.end_s
                self._prompt, self._output = chunk.prompt_tokens.tolist(), chunk.output_tokens.tolist()
                return
        self._times, self.arrivals_done = [], True

    def add_event(self, at_s: float) -> None:
        heapq.heappush(self._events, at_s)

    def next_arrival_s(self, replica: int | None = None) -> float:
        events, now = self._events, self.env.now
        while events and events[0] <= now:
            heapq.heappop(events)
        arrival = self._next_arrival_for(replica)
        return min(arrival, events[0]) if events else arrival

    def _next_arrival_for(self, replica: int | None) -> float:
        """The next arrival that could join `replica`. Round robin over a ready set that only fleet
        events change decides it: arrival pos + d goes to ready[(next + d) % n]; past the loaded
        chunk, the chunk's end stands in (an earlier horizon only cuts a run sooner)."""
        times, pos = self._times, self._pos
        if pos >= len(times):
            return math.inf
        fleet = self.fleet
        if replica is None or fleet.round_robin is None or fleet.backlog:
            return times[pos]
        position = fleet.ready_position.get(replica)
        if position is None:  # draining: no arrival joins it
            return math.inf
        ahead = pos + (position - fleet.round_robin._next) % len(fleet.ready)
        return times[ahead] if ahead < len(times) else self._chunk_end_s

    def on_ended(self, row: int, lost: bool = False) -> None:
        """A request ended (finished, rejected, or lost with its replica): tally it, free its row
        at the next arrival (the scheduler that ended it may still be inside its commit)."""
        table = self.table
        self.tally.ended(table, row, lost)
        if self.minute_tally is not None:
            self.minute_tally.ended(table, row, lost)
        self._to_release.append(row)
        self.n_open -= 1
        fr = self.fleet.by_index.get(int(table.replica[row]))
        if fr is not None and fr.state == "draining":
            self.fleet.stop_if_drained(fr)

    def arrivals(self):
        """The SimPy process: each arrival takes a row and goes to the router."""
        env, table, tally, fleet = self.env, self.table, self.tally, self.fleet
        while not self.arrivals_done:
            times, prompt, output = self._times, self._prompt, self._output
            while self._pos < len(times):
                i = self._pos
                delay = times[i] - env.now
                if delay > 0:
                    yield env.timeout(delay)
                self._pos += 1
                for row in self._to_release:
                    table.release(row)
                self._to_release.clear()
                row = table.admit(times[i], prompt[i], output[i])
                self.n_arrived += 1
                self.n_open += 1
                tally.add("arrived", times[i])
                if self.minute_tally is not None:
                    self.minute_tally.add("arrived", times[i])
                fleet.dispatch(row)
            self._load_next_chunk()
