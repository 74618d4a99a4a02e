"""Disaggregated prefill/decode (Splitwise / DistServe / Dynamo-style xPyD): P prefill replicas
compute prompts and the first token, the KV cache moves over a link to one of D decode replicas,
which generate the rest. See `build.py` for the wiring and `coordinator.py` for the handoff."""

from sim.engine.disagg.link import KVLink, resolve_link

__all__ = ["KVLink", "resolve_link"]
