"""The launch command line of a planned replica, for the engine the simulation assumed.

Derived from the simulated configuration, not measured on the engine: the flags say which knobs
the simulation used, under the engine's own names. Until engine presets exist, the assumed engine
is vLLM (infersim's knob names are vLLM's).
"""

from __future__ import annotations

import shlex

from sim.config import EngineConfig
from sim.model import load_model

ASSUMED_ENGINE = "vllm"
LABEL = "derived from the simulation (infersim {version}, engine assumed: {engine}); not measured on the engine"
DTYPE_FLAGS = {"fp8": "fp8"}  # infersim dtype -> vLLM's --kv-cache-dtype / --quantization value


def vllm_command(cfg: EngineConfig) -> str:
    """`vllm serve <model> --tensor-parallel-size ...` for one replica of `cfg`."""
    model = load_model(cfg.model)
    args = ["vllm", "serve", model.hf_name or cfg.model,
            "--tensor-parallel-size", str(cfg.tp),
            "--max-num-seqs", str(cfg.max_num_seqs),
            "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
            "--block-size", str(cfg.block_size),
            "--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.max_model_len is not None:
        args += ["--max-model-len", str(cfg.max_model_len)]
    if cfg.policy in ("chunked", "radix"):
        args.append("--enable-chunked-prefill")
    args.append("--enable-prefix-caching" if cfg.policy == "radix" else "--no-enable-prefix-caching")
    if cfg.kv_dtype in DTYPE_FLAGS:
        args += ["--kv-cache-dtype", DTYPE_FLAGS[cfg.kv_dtype]]
    if cfg.weight_dtype in DTYPE_FLAGS:
        args += ["--quantization", DTYPE_FLAGS[cfg.weight_dtype]]
    if cfg.preemption_mode == "swap":
        args += ["--swap-space", f"{cfg.swap_space:g}"]
    return shlex.join(args)


def launch_command(cfg: EngineConfig, replicas: int) -> dict:
    """plan.json's `launch`: the command per replica, how many, and the label saying where it comes from."""
    from sim import __version__

    return {"engine": ASSUMED_ENGINE, "command": vllm_command(cfg), "replicas": replicas,
            "label": LABEL.format(version=__version__, engine=ASSUMED_ENGINE)}
