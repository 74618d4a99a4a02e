"""The launch command line of a planned replica, for the engine the simulation assumed.

Derived from the simulated configuration, not measured on the engine: the flags say which knobs
the simulation used, under the engine's own names. Until engine presets exist, the assumed engine
is vLLM (infersim's knob names are vLLM's).
"""

from __future__ import annotations

import shlex

from sim.config import EngineConfig
from sim.model import load_model

DEFAULT_ENGINE = "vllm"  # without a preset, infersim's knobs are vLLM's
LABEL = "derived from the simulation (infersim {version}, engine assumed: {engine}); not measured on the engine"
DTYPE_FLAGS = {"fp8": "fp8"}  # infersim dtype -> the engines' fp8 value


def vllm_command(cfg: EngineConfig) -> str:
    """`vllm serve <model> --tensor-parallel-size ...` for one replica of `cfg`."""
    args = ["vllm", "serve", _hf_name(cfg), "--tensor-parallel-size", str(cfg.tp),
            "--max-num-seqs", str(cfg.max_num_seqs), "--max-num-batched-tokens", str(cfg.max_num_batched_tokens),
            "--block-size", str(cfg.block_size), "--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}"]
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


def sglang_command(cfg: EngineConfig) -> str:
    """`python -m sglang.launch_server --model-path <model> --tp-size ...` for one replica."""
    args = ["python", "-m", "sglang.launch_server", "--model-path", _hf_name(cfg), "--tp-size", str(cfg.tp),
            "--max-running-requests", str(cfg.max_num_seqs),
            "--chunked-prefill-size", str((cfg.chunk_size or cfg.max_num_batched_tokens)
                                          if cfg.policy in ("chunked", "radix") else -1),
            "--max-prefill-tokens", str(cfg.max_num_batched_tokens),
            "--page-size", str(cfg.block_size), "--mem-fraction-static", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.max_model_len is not None:
        args += ["--context-length", str(cfg.max_model_len)]
    if cfg.policy != "radix":
        args.append("--disable-radix-cache")
    if cfg.kv_dtype in DTYPE_FLAGS:
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    return shlex.join(args)


def trtllm_command(cfg: EngineConfig) -> str:
    """`trtllm-serve <model> --tp_size ...` for one replica."""
    args = ["trtllm-serve", _hf_name(cfg), "--tp_size", str(cfg.tp), "--max_batch_size", str(cfg.max_num_seqs),
            "--max_num_tokens", str(cfg.max_num_batched_tokens),
            "--kv_cache_free_gpu_memory_fraction", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.max_model_len is not None:
        args += ["--max_seq_len", str(cfg.max_model_len)]
    return shlex.join(args)


def lmdeploy_command(cfg: EngineConfig) -> str:
    """`lmdeploy serve api_server <model> --tp ...` for one replica (TurboMind)."""
    args = ["lmdeploy", "serve", "api_server", _hf_name(cfg), "--backend", "turbomind", "--tp", str(cfg.tp),
            "--max-batch-size", str(cfg.max_num_seqs), "--max-prefill-token-num", str(cfg.max_num_batched_tokens),
            "--cache-block-seq-len", str(cfg.block_size), "--cache-max-entry-count", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.max_model_len is not None:
        args += ["--session-len", str(cfg.max_model_len)]
    if cfg.policy == "radix":
        args.append("--enable-prefix-caching")
    return shlex.join(args)


COMMANDS = {"vllm": vllm_command, "sglang": sglang_command, "trtllm": trtllm_command, "lmdeploy": lmdeploy_command}


def _hf_name(cfg: EngineConfig) -> str:
    return load_model(cfg.model).hf_name or cfg.model


def assumed_engine(cfg: EngineConfig) -> str:
    """The engine preset the simulation used (its `name`), or vLLM without one."""
    if getattr(cfg, "engine", None) is None:
        return DEFAULT_ENGINE
    from sim.engines.preset import load_engine

    return load_engine(cfg.engine).family


def launch_command(cfg: EngineConfig, replicas: int) -> dict:
    """plan.json's `launch`: the command per replica for the assumed engine (vLLM's for a preset
    without a known command line), how many, and the label saying where it comes from."""
    from sim import __version__

    engine = assumed_engine(cfg)
    command = COMMANDS.get(engine, vllm_command)(cfg)
    return {"engine": engine, "command": command, "replicas": replicas,
            "label": LABEL.format(version=__version__, engine=engine)}
