"""The launch command line of a planned replica, for the engine the simulation assumed.

Derived from the simulated configuration, not measured on the engine: the flags say which knobs
the simulation used, under the engine's own names, and every line comes with the comment line naming
the engine and version simulated (`simulated`, sim.planner.launch_names). Without a preset (`--engine
none`) the line is vLLM's (infersim's knob names are vLLM's).
"""

from __future__ import annotations

import shlex

from sim.inputs.config import EngineConfig
from sim.inputs.model import load_model
from sim.planner.launch_layout import sglang_layout_args
from sim.planner.launch_names import simulated_comment
from sim.planner.launch_nodes import per_node_commands
from sim.planner.launch_vllm import ROUTER_HINT, VLLM_ALL2ALL_DEFAULT, vllm_all2all_backend, vllm_args

GENERIC_LINE_ENGINE = "vllm"  # the generic engine (no preset): its knobs are written under vLLM's names
LABEL = "derived from the simulation (infersim {version}, engine assumed: {engine}); not measured on the engine"
DTYPE_FLAGS = {"fp8": "fp8"}  # infersim dtype -> the engines' fp8 value


def vllm_command(cfg: EngineConfig, model_id: str | None = None) -> str:
    """`vllm serve <model> --tensor-parallel-size ...` for one replica of `cfg` (sim.planner.launch_vllm)."""
    return shlex.join(vllm_args(cfg, model_id)[0])


def sglang_command(cfg: EngineConfig, missing: list[str] | None = None) -> str:
    """`python -m sglang.launch_server --model-path <model> --tp-size ...` for one replica, its
    layout's flags included (sim.planner.launch_layout; what they cannot say goes to `missing`).

    Under `--enable-dp-attention` SGLang reads `--max-running-requests` and `--chunked-prefill-size`
    as the whole replica's and gives each of the `--dp-size` attention ranks 1/dp of them
    (python/sglang/srt/server_args.py, `_handle_data_parallelism`: `chunked_prefill_size //=
    dp_size`; python/sglang/srt/model_executor/model_runner.py: `max_running_requests // dp_size`
    per DP-attention worker), while `--max-prefill-tokens` stays each rank's scheduler budget. The
    simulation's knobs are per attention rank, so the line writes those two multiplied by dp."""
    ranks = sglang_dp_attention_ranks(cfg)
    chunk = (cfg.chunk_size or cfg.max_num_batched_tokens) if cfg.policy in ("chunked", "radix") else None
    args = ["python", "-m", "sglang.launch_server", "--model-path", _hf_name(cfg),
            *sglang_layout_args(cfg, [] if missing is None else missing),
            "--max-running-requests", str(cfg.max_num_seqs * ranks),
            "--chunked-prefill-size", str(-1 if chunk is None else chunk * ranks),
            "--max-prefill-tokens", str(cfg.max_num_batched_tokens),
            "--page-size", str(cfg.block_size), "--mem-fraction-static", f"{cfg.gpu_memory_utilization:g}"]
    if cfg.max_model_len is not None:
        args += ["--context-length", str(cfg.max_model_len)]
    if cfg.policy != "radix":
        args.append("--disable-radix-cache")
    if cfg.kv_dtype in DTYPE_FLAGS:
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    return shlex.join(args + sglang_mtp_args(cfg))


def sglang_dp_attention_ranks(cfg: EngineConfig) -> int:
    """The `--dp-size` SGLang divides per-rank limits by: the attention ranks when the line writes
    `--enable-dp-attention` (sim.planner.launch_layout), else 1."""
    ranks = cfg.layout().n_kv_ranks
    return ranks if ranks > 1 else 1


def sglang_mtp_args(cfg: EngineConfig) -> list[str]:
    """SGLang's flags for speculating with the checkpoint's MTP (NextN) layers: its EAGLE worker runs
    them (SGLang's DeepSeek / GLM-4.5 docs), a chain of k proposals (top-k 1) verified as k + 1 draft
    tokens. Other spec methods: none (`_other_engine_gaps` says so)."""
    if not cfg.spec_tokens or cfg.spec_method != "mtp":
        return []
    return ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(cfg.spec_tokens),
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(cfg.spec_tokens + 1)]


def trtllm_command(cfg: EngineConfig, missing: list[str] | None = None) -> str:
    """`trtllm-serve <model> --tp_size ...` for one replica: `--tp_size` the GPUs of one pipeline
    stage, `--pp_size`, `--ep_size` (trtllm-serve's options); attention DP is not a trtllm-serve
    flag (`enable_attention_dp: true` in the `--extra_llm_api_options` YAML, where each attention
    rank keeps its own `max_batch_size` / `max_num_tokens`), named in `missing`."""
    layout = cfg.layout()
    args = ["trtllm-serve", _hf_name(cfg), "--tp_size", str(layout.n_gpus_per_stage)]
    if layout.pp > 1:
        args += ["--pp_size", str(layout.pp)]
    if layout.uses_expert_parallel:
        args += ["--ep_size", str(layout.expert_parallel_size)]
    if layout.n_kv_ranks > 1 and missing is not None:
        missing.append(f"attention DP over {layout.n_kv_ranks} ranks: put `enable_attention_dp: true` in an "
                       "--extra_llm_api_options YAML (the batch and token limits are per rank there)")
    args += ["--max_batch_size", str(cfg.max_num_seqs), "--max_num_tokens", str(cfg.max_num_batched_tokens),
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


SERVERS = {"vllm": "vllm serve", "sglang": "sglang.launch_server", "trtllm": "trtllm-serve",
           "lmdeploy": "lmdeploy serve api_server"}
COMMANDS = {"vllm": vllm_command, "sglang": sglang_command, "trtllm": trtllm_command, "lmdeploy": lmdeploy_command}


def _hf_name(cfg: EngineConfig) -> str:
    return load_model(cfg.model).hf_name or cfg.model


def assumed_engine(cfg: EngineConfig) -> str:
    """The engine preset the simulation used (its `name`), or vLLM without one."""
    if getattr(cfg, "engine", None) is None:
        return GENERIC_LINE_ENGINE
    from sim.inputs.engines.preset import load_engine

    return load_engine(cfg.engine).family


def launch_command(cfg: EngineConfig, replicas: int, model_id: str | None = None) -> dict:
    """plan.json's `launch`: the command per replica for the assumed engine (vLLM's for a preset
    without a known command line), how many, the router the plan assumed, what the command cannot
    express (`not_expressible`), and the label saying where it comes from. `model_id`: the
    checkpoint to serve (default: the model spec's hf_name)."""
    from sim import __version__

    engine = assumed_engine(cfg)
    if engine in COMMANDS and engine != "vllm":
        command, missing = _other_engine_line(engine, cfg, replicas, model_id)
    else:
        args, missing = vllm_args(cfg, model_id, replicas)
        command = shlex.join(args)
    server = engine if engine in COMMANDS else "vllm"  # a preset without a known command line: vLLM's
    return {"engine": engine, "server": SERVERS[server], "command": command,
            "simulated": line_comment(cfg, server), "replicas": replicas, "router": cfg.router,
            "model_id": model_id or _hf_name(cfg), "model_id_from": "--model-id" if model_id else "model spec",
            "not_expressible": missing, "layout_lines": layout_lines(cfg, replicas, model_id),
            "per_node": per_node_commands(cfg, server, shlex.split(command)),
            "label": LABEL.format(version=__version__, engine=engine)}


def _other_engine_line(engine: str, cfg: EngineConfig, replicas: int, model_id: str | None) -> tuple[str, list[str]]:
    missing: list[str] = []
    command = COMMANDS[engine](cfg, missing) if engine in ("sglang", "trtllm") else COMMANDS[engine](cfg)
    if model_id:
        command = command.replace(shlex.quote(_hf_name(cfg)), shlex.quote(model_id), 1)
    return command, missing + _other_engine_gaps(engine, cfg, replicas)


def layout_lines(cfg: EngineConfig, replicas: int, model_id: str | None = None) -> dict:
    """The replica's command for vLLM and for SGLang whatever engine was assumed (the layout
    under each engine's names), each with what it cannot express."""
    vllm, vllm_missing = vllm_args(cfg, model_id, replicas)
    sglang, sglang_missing = _other_engine_line("sglang", cfg, replicas, model_id)
    return {"vllm": {"command": shlex.join(vllm), "simulated": line_comment(cfg, "vllm"),
                     "not_expressible": vllm_missing},
            "sglang": {"command": sglang, "simulated": line_comment(cfg, "sglang"), "not_expressible": sglang_missing}}


def line_comment(cfg: EngineConfig, line_engine: str) -> str:
    """The `# infersim simulated: <engine> <version>` line above a `line_engine` command of `cfg`
    (sim.planner.launch_names); a vLLM line of an EP replica also says which all-to-all it runs
    when vLLM has no backend of the one simulated."""
    notes = []
    if line_engine == "vllm" and cfg.layout().uses_expert_parallel and vllm_all2all_backend(cfg) is None:
        notes.append(f"MoE all-to-all simulated: {cfg.moe_a2a_backend}, which vLLM lacks: this line runs vLLM's "
                     f"default --all2all-backend {VLLM_ALL2ALL_DEFAULT}, not simulated")
    return simulated_comment(cfg, line_engine, notes)


def _other_engine_gaps(engine: str, cfg: EngineConfig, replicas: int) -> list[str]:
    """What the SGLang / TensorRT-LLM / LMDeploy lines leave out (they carry the core knobs only)."""
    gaps = []
    if cfg.cpu_cache_gib:
        gaps.append(f"host prefix tier {cfg.cpu_cache_gib:g} GiB per replica: not written for this engine")
    if cfg.spec_tokens and not (engine == "sglang" and cfg.spec_method == "mtp"):
        gaps.append(f"speculative decoding ({cfg.spec_tokens} tokens): not written for this engine")
    if replicas > 1:
        gaps.append(f"router {cfg.router} across {replicas} replicas: put {ROUTER_HINT[cfg.router]} in front")
    return gaps
