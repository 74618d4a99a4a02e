"""Scheduler policies: one shared base (`base.Scheduler`) and one short file per policy."""

from sim.engine.sched.base import Scheduler, StepPlan
from sim.engine.sched.registry import make_scheduler

__all__ = ["Scheduler", "StepPlan", "make_scheduler"]
