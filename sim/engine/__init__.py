"""The simulated serving engine: replicas, routers, schedulers, KV cache, lockstep ranks, spec decoding."""
