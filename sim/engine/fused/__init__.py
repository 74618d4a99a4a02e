"""The fused core: a policy on one replica as one flat loop with running sums (issue 48, step 2).

It computes what the reference stepper (sim/engine/reference) computes, step for step, but keeps a
decode step O(1) in Python: the batch as running sums and a heap of finish steps instead of a walk
over its sequences. `tests/test_reference_stepper.py` holds it, the engine and the reference equal.
Only the continuous policy is written so far.
"""
