"""Policy name -> scheduler class."""

from __future__ import annotations

from sim.engine.sched.base import Scheduler
from sim.engine.sched.chunked import ChunkedScheduler
from sim.engine.sched.continuous import ContinuousScheduler
from sim.engine.sched.lora import with_lora
from sim.engine.sched.radix import RadixChunkedScheduler, RadixContinuousScheduler
from sim.engine.sched.static import StaticScheduler
from sim.inputs.config import EngineConfig


def scheduler_class(cfg: EngineConfig) -> type[Scheduler]:
    policy = _policy_class(cfg)
    return with_lora(policy) if cfg.enable_lora else policy


def _policy_class(cfg: EngineConfig) -> type[Scheduler]:
    if cfg.policy == "radix":
        return RadixChunkedScheduler if cfg.radix_chunked else RadixContinuousScheduler
    return {"static": StaticScheduler, "continuous": ContinuousScheduler, "chunked": ChunkedScheduler}[cfg.policy]


def make_scheduler(cfg: EngineConfig, *args, **kwargs) -> Scheduler:
    return scheduler_class(cfg)(cfg, *args, **kwargs)
