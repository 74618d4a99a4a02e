"""Policy name -> scheduler class."""

from __future__ import annotations

from sim.config import EngineConfig
from sim.sched.base import Scheduler
from sim.sched.chunked import ChunkedScheduler
from sim.sched.continuous import ContinuousScheduler
from sim.sched.radix import RadixChunkedScheduler, RadixContinuousScheduler
from sim.sched.static import StaticScheduler


def scheduler_class(cfg: EngineConfig) -> type[Scheduler]:
    if cfg.policy == "radix":
        return RadixChunkedScheduler if cfg.radix_chunked else RadixContinuousScheduler
    return {"static": StaticScheduler, "continuous": ContinuousScheduler, "chunked": ChunkedScheduler}[cfg.policy]


def make_scheduler(cfg: EngineConfig, *args, **kwargs) -> Scheduler:
    return scheduler_class(cfg)(cfg, *args, **kwargs)
