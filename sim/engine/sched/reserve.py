"""KV admission `reserve_full` (TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler, its default): a
request starts only when the blocks it will hold at its end (whole prompt + output) fit beside what
every admitted request will hold at its end, so no running request is ever preempted for blocks.
A mixin of the scheduler base; it costs nothing under `on_demand` (vLLM, SGLang)."""

from __future__ import annotations


class Reservations:
    """Reservation bookkeeping: blocks each admitted request will hold at its end, and their sum."""

    def init_reservations(self, cfg) -> None:
        self._reserve_full = cfg.kv_admission == "reserve_full"
        self._reserved_blocks: dict[int, int] = {}
        self._n_reserved = 0

    def _reserve(self, rid: int) -> bool:
        """reserve_full (TensorRT-LLM GUARANTEED_NO_EVICT): reserve the blocks `rid` will hold when its
        last token is in the cache, if they fit beside every admitted request's reservation (watermark
        kept); False leaves it waiting. A request already holding a reservation keeps it."""
        if rid in self._reserved_blocks:
            return True
        b = self.blocks
        final = -(-self.reservation_tokens(rid) // b.block_size)
        if self._n_reserved + final > b.n_blocks - b.watermark_blocks:
            return False
        self._reserved_blocks[rid] = final
        self._n_reserved += final
        return True

    def reservation_tokens(self, rid: int) -> int:
        """Tokens `rid` will have in this replica's cache at its end: its whole prompt and output here
        (a prefill replica of a disaggregated cluster holds less: sim/engine/disagg/roles.py)."""
        return int(self.table.final_tokens[rid])

    def unreserve(self, rids) -> None:
        """Requests that leave (finished, preempted, or not admitted after all) give their reservation back."""
        for rid in rids:
            self._n_reserved -= self._reserved_blocks.pop(rid, 0)
