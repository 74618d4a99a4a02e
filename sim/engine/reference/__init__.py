"""The reference stepper: the scheduler policies written one step at a time, as plainly as they read.

It is the specification the fast engine (sim/engine/sched, with its decode runs, runs past finishes
and residue counting) is held to: `tests/test_reference_stepper.py` replays bundled traces through
both and asserts the same requests table and summary. Only the continuous policy is written so far.
"""
