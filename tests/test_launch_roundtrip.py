"""Every engine's launch line, read back the way that engine's own argument parser reads it, gives the
simulated per-rank batch, token budget, prefill chunk and parallel layout (issue 45, item 3).

Each spec below is a small argparse parser of the flags the engine takes, with the meaning the engine
gives them after parsing: SGLang divides `--max-running-requests` and `--chunked-prefill-size` by
`--dp-size` under `--enable-dp-attention` (python/sglang/srt/server_args.py `_handle_data_parallelism`;
python/sglang/srt/model_executor/model_runner.py, `max_running_requests // dp_size` per worker); vLLM
runs one engine core per `--data-parallel-size` rank, each with the whole `--max-num-seqs` and
`--max-num-batched-tokens`; trtllm-serve's `--tp_size` is the GPUs of one stage. The parsers error on a
flag the engine does not take (allow_abbrev as argparse's default, SGLang's and vLLM's too), so a line
with a misspelt flag fails here as it would fail at the server."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

import pytest

from sim.inputs.config import EngineConfig
from sim.planner.launch import launch_command, lmdeploy_command, sglang_command, trtllm_command
from sim.planner.launch_vllm import vllm_args


@dataclass(frozen=True)
class Served:
    """What a server started by a line runs, per attention rank."""

    batch: int  # sequences one attention rank runs at once
    budget: int  # tokens one rank's step may schedule
    chunk: int | None  # prompt tokens of one request per step (None: no chunking)
    attention_tp: int
    attention_ranks: int
    pp: int
    ep: int  # GPUs the routed experts are sharded over (1: none)
    gpus: int


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a flag the engine refuses fails the test with the engine's words
        raise AssertionError(f"{self.prog}: {message}")


def _bool_pair(parser, name: str) -> None:
    parser.add_argument(f"--{name}", dest=name.replace("-", "_"), action="store_true", default=None)
    parser.add_argument(f"--no-{name}", dest=name.replace("-", "_"), action="store_false")


def vllm_served(line: str) -> Served:
    """`vllm serve MODEL ...` as vLLM's EngineArgs read it (vllm/engine/arg_utils.py)."""
    argv = shlex.split(line)
    assert argv[:2] == ["vllm", "serve"]
    p = _Parser(prog="vllm serve")
    p.add_argument("model")
    for flag in ("--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size", "--max-num-seqs",
                 "--max-num-batched-tokens", "--long-prefill-token-threshold", "--block-size", "--max-model-len",
                 "--seed", "--num-gpu-blocks-override", "--port"):
        p.add_argument(flag, type=int)
    for flag in ("--gpu-memory-utilization", "--kv-offloading-size"):
        p.add_argument(flag, type=float)
    p.add_argument("--all2all-backend", default="allgather_reducescatter",
                   choices=["allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency",
                            "mori_high_throughput", "mori_low_latency", "nixl_ep", "flashinfer_nvlink_two_sided",
                            "flashinfer_nvlink_one_sided"])
    for flag in ("--kv-cache-dtype", "--quantization", "--speculative-config", "--kv-offloading-backend",
                 "--kv-transfer-config"):
        p.add_argument(flag)
    for flag in ("--enable-expert-parallel", "--enforce-eager", "--disable-custom-all-reduce"):
        p.add_argument(flag, action="store_true")
    _bool_pair(p, "enable-chunked-prefill")
    _bool_pair(p, "enable-prefix-caching")
    a = p.parse_args(argv[2:])
    tp, dp, pp = a.tensor_parallel_size or 1, a.data_parallel_size or 1, a.pipeline_parallel_size or 1
    chunked = a.enable_chunked_prefill is not False
    return Served(batch=a.max_num_seqs, budget=a.max_num_batched_tokens,
                  chunk=(a.long_prefill_token_threshold or a.max_num_batched_tokens) if chunked else None,
                  attention_tp=tp, attention_ranks=dp, pp=pp, ep=tp * dp if a.enable_expert_parallel else 1,
                  gpus=tp * dp * pp)


def sglang_served(line: str) -> Served:
    """`python -m sglang.launch_server ...` as SGLang's ServerArgs read it, DP-attention division included."""
    argv = shlex.split(line)
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    p = _Parser(prog="sglang.launch_server")
    p.add_argument("--model-path", required=True)
    for flag in ("--tp-size", "--dp-size", "--ep-size", "--pp-size", "--nnodes", "--max-running-requests",
                 "--chunked-prefill-size", "--max-prefill-tokens", "--page-size", "--context-length",
                 "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                 "--ep-num-redundant-experts", "--port"):
        p.add_argument(flag, type=int)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--moe-a2a-backend", choices=["none", "deepep", "mooncake", "mori", "ascend_fuseep", "flashinfer"])
    p.add_argument("--deepep-mode", choices=["normal", "low_latency", "auto"])
    for flag in ("--kv-cache-dtype", "--speculative-algorithm", "--disaggregation-mode",
                 "--disaggregation-transfer-backend", "--host", "--dist-init-addr", "--node-rank"):
        p.add_argument(flag)
    for flag in ("--enable-dp-attention", "--disable-radix-cache", "--enable-two-batch-overlap"):
        p.add_argument(flag, action="store_true")
    a = p.parse_args(argv[3:])
    tp, dp, pp = a.tp_size or 1, a.dp_size or 1, a.pp_size or 1
    if dp == 1:
        a.enable_dp_attention = False  # ServerArgs: dp_size 1 turns DP attention off
    ranks = dp if a.enable_dp_attention else 1
    chunk = a.chunked_prefill_size // ranks if a.chunked_prefill_size > 0 else None  # server_args.py
    return Served(batch=a.max_running_requests // ranks, budget=a.max_prefill_tokens, chunk=chunk,  # model_runner.py
                  attention_tp=tp // ranks, attention_ranks=ranks, pp=pp, ep=a.ep_size or 1, gpus=tp * pp)


def trtllm_served(line: str) -> Served:
    """`trtllm-serve MODEL ...` as its options read it (tensorrt_llm/commands/serve.py)."""
    argv = shlex.split(line)
    assert argv[0] == "trtllm-serve"
    p = _Parser(prog="trtllm-serve")
    p.add_argument("model")
    for flag in ("--tp_size", "--pp_size", "--ep_size", "--max_batch_size", "--max_num_tokens", "--max_seq_len"):
        p.add_argument(flag, type=int)
    p.add_argument("--kv_cache_free_gpu_memory_fraction", type=float)
    a = p.parse_args(argv[1:])
    tp, pp = a.tp_size or 1, a.pp_size or 1
    return Served(batch=a.max_batch_size, budget=a.max_num_tokens, chunk=a.max_num_tokens, attention_tp=tp,
                  attention_ranks=1, pp=pp, ep=a.ep_size or 1, gpus=tp * pp)


def lmdeploy_served(line: str) -> Served:
    """`lmdeploy serve api_server MODEL ...` (TurboMind engine config)."""
    argv = shlex.split(line)
    assert argv[:3] == ["lmdeploy", "serve", "api_server"]
    p = _Parser(prog="lmdeploy serve api_server")
    p.add_argument("model")
    p.add_argument("--backend", choices=["turbomind", "pytorch"])
    for flag in ("--tp", "--max-batch-size", "--max-prefill-token-num", "--cache-block-seq-len", "--session-len"):
        p.add_argument(flag, type=int)
    p.add_argument("--cache-max-entry-count", type=float)
    p.add_argument("--enable-prefix-caching", action="store_true")
    a = p.parse_args(argv[3:])
    return Served(batch=a.max_batch_size, budget=a.max_prefill_token_num, chunk=a.max_prefill_token_num,
                  attention_tp=a.tp, attention_ranks=1, pp=1, ep=1, gpus=a.tp)


def simulated(cfg: EngineConfig, chunked: bool = True) -> Served:
    """What the simulation ran per attention rank (sim/engine/lockstep.py: one scheduler per rank)."""
    layout = cfg.layout()
    return Served(batch=cfg.max_num_seqs, budget=cfg.max_num_batched_tokens,
                  chunk=(cfg.chunk_size or cfg.max_num_batched_tokens) if chunked else None,
                  attention_tp=layout.attention_tp, attention_ranks=layout.n_kv_ranks, pp=layout.pp,
                  ep=layout.expert_parallel_size, gpus=layout.n_gpus)


MOE = dict(model="qwen3-30b-a3b", hardware="h100-sxm")
LAYOUTS = {  # name -> layout knobs (vLLM spelling, as plan writes them; and SGLang's DP attention)
    "tp4": dict(tp=4),
    "tp2 pp2": dict(tp=2, pp=2),
    "tp4 ep4": dict(tp=4, enable_expert_parallel=True),
    "dp4 x tp2 ep8": dict(tp=2, dp=4, enable_expert_parallel=True),
    "dp8 x tp1 ep8 deepep": dict(tp=1, dp=8, enable_expert_parallel=True, moe_a2a_backend="deepep",
                                 deepep_mode="low_latency"),
    "sglang dp4 in tp8": dict(tp=8, dp=4, enable_dp_attention=True, ep=8),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_vllm_and_sglang_lines_read_back_as_simulated(engine, layout):
    cfg = EngineConfig(**MOE, engine=engine, **LAYOUTS[layout])
    lines = launch_command(cfg, 2)["layout_lines"]
    want = simulated(cfg)
    assert vllm_served(lines["vllm"]["command"]) == want
    assert sglang_served(lines["sglang"]["command"]) == want


def test_sglang_line_of_the_documented_disaggregated_layout_multiplies_by_dp():
    """The regression: dp8 attention ranks each ran 1/8 of the simulated batch and chunk."""
    cfg = EngineConfig(model="deepseek-r1", weight_dtype="fp8", hardware="h200", engine="sglang", policy="chunked",
                       tp=1, dp=8, enable_expert_parallel=True)
    argv = shlex.split(sglang_command(cfg))
    assert argv[argv.index("--max-running-requests") + 1] == str(8 * cfg.max_num_seqs)
    assert argv[argv.index("--chunked-prefill-size") + 1] == str(8 * (cfg.chunk_size or cfg.max_num_batched_tokens))
    assert sglang_served(sglang_command(cfg)) == simulated(cfg)


@pytest.mark.parametrize("layout", ["tp4", "tp2 pp2", "tp4 ep4"])
def test_trtllm_line_reads_back_as_simulated(layout):
    cfg = EngineConfig(**MOE, engine="trtllm", **LAYOUTS[layout])
    launch = launch_command(cfg, 1)
    assert launch["engine"] == "trtllm" and trtllm_served(launch["command"]) == simulated(cfg)
    assert trtllm_served(trtllm_command(cfg)) == simulated(cfg)


def test_lmdeploy_line_reads_back_as_simulated():
    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm", engine="lmdeploy", tp=2)
    assert lmdeploy_served(lmdeploy_command(cfg)) == simulated(cfg)


def test_vllm_line_states_the_all_to_all_it_runs():
    """vLLM's default --all2all-backend is allgather_reducescatter (vllm/config/parallel.py): a line of a
    replica priced on it or on DeepEP names the backend; one priced on NCCL all-to-all, which vLLM lacks,
    says in its comment line that it runs vLLM's default, not what was simulated."""
    base = EngineConfig(**MOE, engine="vllm", tp=1, dp=4, enable_expert_parallel=True)
    for backend, mode, flag in (("allgather_reducescatter", "auto", "allgather_reducescatter"),
                                ("deepep", "normal", "deepep_high_throughput"),
                                ("deepep", "low_latency", "deepep_low_latency")):
        cfg = base.model_copy(update={"moe_a2a_backend": backend, "deepep_mode": mode})
        argv, missing = vllm_args(cfg)
        assert argv[argv.index("--all2all-backend") + 1] == flag
        assert not any("all-to-all" in m for m in missing)
        assert "all-to-all" not in launch_command(cfg, 1)["simulated"]
    argv, missing = vllm_args(base)
    assert "--all2all-backend" not in argv and any("NCCL all-to-all" in m for m in missing)
    assert "runs vLLM's default --all2all-backend allgather_reducescatter" in launch_command(base, 1)["simulated"]
    assert "--all2all-backend" not in vllm_args(EngineConfig(**MOE, engine="vllm", tp=4))[0]  # no EP, no backend


@pytest.mark.parametrize("engine, names", [("vllm", "vLLM 0.15"), ("sglang", "SGLang 0.5.6"),
                                           ("sglang@0.4", "SGLang 0.4"), ("trtllm", "TensorRT-LLM 1.2"),
                                           ("trtllm@1.0", "TensorRT-LLM 1.0"), ("lmdeploy", "LMDeploy 0.6"),
                                           ("vllm@0.10", "vLLM 0.10")])
def test_every_line_names_its_engine_and_version(engine, names):
    cfg = EngineConfig(model="llama-3-8b", hardware="h100-sxm", engine=engine, tp=2)
    launch = launch_command(cfg, 1)
    assert launch["simulated"].startswith(f"# infersim simulated: {names}")
    for line_engine, line in launch["layout_lines"].items():
        assert line["simulated"].startswith(f"# infersim simulated: {names}")
        same = launch["engine"] == line_engine
        assert ("not simulated on" in line["simulated"]) is not same
    generic = launch_command(EngineConfig(model="llama-3-8b", tp=2), 1)
    assert "the generic engine" in generic["simulated"]
