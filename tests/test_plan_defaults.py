"""Issue 35 items 2, 3, 6 and 7: `plan`'s defaults. It simulates the newest vLLM preset and prints only
flags that the simulation used; a MoE model gets the EP / DP-attention layouts searched; the screen
always sizes plain TP; vLLM's flag names read as infersim's."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.inputs.engines.apply import fit_inherited_to_policy
from sim.inputs.engines.preset import load_engine

DENSE = ["plan", "--workload", "splitwise_conv", "--model", "llama-3-8b", "--hardware", "h100-sxm", "--tp", "1,2",
         "--max-requests", "60", "--workers", "1", "--no-verify", "--target-qps", "4",
         "--slo", "ttft_p99=2s", "--slo", "tpot_p99=100ms"]
MOE = ["plan", "--workload", "splitwise_conv", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--tp", "1,2",
       "--policy", "chunked", "--max-requests", "60", "--workers", "1", "--no-verify", "--target-qps", "4",
       "--slo", "ttft_p99=2s", "--slo", "tpot_p99=50ms"]


def _plan(args: list[str], *extra: str) -> dict:
    result = CliRunner().invoke(app, [*args, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _simulated(plan: dict) -> EngineConfig:
    """The recommended candidate's config, rebuilt as the candidate builder builds it."""
    row = plan["recommended"]
    own = {**row["knobs"], "hardware": row["hardware"], "tp": row["tp"], "policy": row["policy"], "replicas": 1}
    return EngineConfig.model_validate(fit_inherited_to_policy({**plan["config"], **own}, own))


def _flags(command: str) -> dict:
    argv, out, i = shlex.split(command)[3:], {}, 0
    while i < len(argv):
        takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        out[argv[i]] = argv[i + 1] if takes_value else True
        i += 2 if takes_value else 1
    return out


def _check_vllm_flag(flag: str, value, cfg: EngineConfig) -> None:
    """One printed `vllm serve` flag against the simulated config; a flag with no rule fails."""
    chunked = cfg.policy == "chunked" or (cfg.policy == "radix" and cfg.radix_chunked)
    kv = {"auto": ("bf16", "fp16"), "fp8": ("fp8",)}
    rules = {
        "--tensor-parallel-size": lambda: int(value) == cfg.tp,
        "--max-num-seqs": lambda: int(value) == cfg.max_num_seqs,
        "--max-num-batched-tokens": lambda: int(value) == cfg.max_num_batched_tokens,
        "--block-size": lambda: int(value) == cfg.block_size,
        "--gpu-memory-utilization": lambda: float(value) == cfg.gpu_memory_utilization,
        "--max-model-len": lambda: cfg.max_model_len is None or int(value) == cfg.max_model_len,
        "--enable-chunked-prefill": lambda: chunked, "--no-enable-chunked-prefill": lambda: not chunked,
        "--enable-prefix-caching": lambda: cfg.policy == "radix",
        "--no-enable-prefix-caching": lambda: cfg.policy != "radix",
        "--kv-cache-dtype": lambda: cfg.kv_dtype in kv[value],
        "--disable-custom-all-reduce": lambda: (cfg.allreduce_kind or load_engine(cfg.engine).allreduce_kind)
        == "nccl",
        "--data-parallel-size": lambda: int(value) == cfg.dp,
        "--enable-expert-parallel": lambda: bool(cfg.enable_expert_parallel),
        "--quantization": lambda: value == cfg.weight_dtype,
        "--long-prefill-token-threshold": lambda: int(value) == cfg.chunk_size,
        "--seed": lambda: int(value) == cfg.seed,
    }
    assert flag in rules, f"printed flag {flag} has no check against the simulation"
    assert rules[flag](), f"{flag} {value} does not match the simulated config"


def test_plan_simulates_the_newest_vllm_preset_and_every_printed_flag_was_simulated():
    plan = _plan(DENSE)
    assert plan["config"]["engine"] == "vllm" and load_engine("vllm").name == "vllm@0.15"
    assert plan["launch"]["engine"] == "vllm"
    cfg = _simulated(plan)
    flags = _flags(plan["launch"]["command"])
    for flag, value in flags.items():
        _check_vllm_flag(flag, value, cfg)
    assert "--disable-custom-all-reduce" not in flags  # the preset's all-reduce is vLLM's own choice
    # the engine's default policy (vLLM: prefix caching on chunked prefill) is the one searched
    assert cfg.policy == "radix" and "--enable-prefix-caching" in flags
    assert {row["policy"] for row in plan["candidates"]} == {"radix"}
    assert "--disable-radix-cache" not in plan["launch"]["layout_lines"]["sglang"]["command"]


def test_without_prefix_ids_the_twin_kept_is_the_engines_default():
    """splitwise_conv carries no prefix ids: radix and chunked replay alike; vLLM's default (radix) is kept."""
    plan = _plan(DENSE, "--policy", "chunked,radix")
    assert {row["policy"] for row in plan["candidates"]} == {"radix"}
    assert any(s["policy"] == "chunked" and "engine's default" in s["reason"] for s in plan["skipped"])
    assert "--enable-prefix-caching" in _flags(plan["launch"]["command"])


def test_the_printed_line_is_the_json_line_and_names_weights_and_engine():
    result = CliRunner().invoke(app, DENSE)
    assert result.exit_code == 0, result.output
    plan = _plan(DENSE)
    assert plan["launch"]["command"] in result.output.replace("\n", " ") or all(
        part in result.output for part in shlex.split(plan["launch"]["command"])[:4])
    assert "weights: bf16" in result.output and "engine: vllm@0.15" in result.output
    assert plan["weight_dtype"] == {"value": "bf16", "described": "bf16"}


def test_engine_none_is_the_generic_engine_of_before():
    plan = _plan(DENSE, "--engine", "none")
    assert plan["config"]["engine"] is None and plan["recommended"]["policy"] == "chunked"
    assert "--disable-custom-all-reduce" in _flags(plan["launch"]["command"]) or plan["recommended"]["tp"] == 1


def test_a_moe_model_gets_ep_and_dp_attention_layouts_by_default_and_the_screen_sizes_plain_tp():
    plan = _plan(MOE)
    assert plan["layouts"]["expert_parallel"] == [False, True] and plan["layouts"]["dp"] == [1, 2, 4, 8]
    screen = plan["screen"]
    assert screen["n_screened"] > screen["n_sized"] and screen["n_dropped"] == screen["n_screened"] - screen["n_sized"]
    plain = [r for r in screen["estimates"] if r["candidate"].split()[1].startswith("tp")
             and " ep" not in r["candidate"] and " pp" not in r["candidate"]]
    assert plain and all(r["sized"] for r in plain)  # tp1 and tp2 within the node: what plain-TP plan sizes
    dropped = [r for r in screen["estimates"] if not r["sized"]]
    assert screen["best_dropped"]["cost_per_hour_usd"] == min(r["cost_per_hour_usd"] for r in dropped)
    assert _plan(MOE, "--no-layout-search")["layouts"] is None
    assert _plan(DENSE)["layouts"] is None  # dense: plain TP as before


def test_layout_search_is_never_dearer_than_plain_tp():
    wide, narrow = _plan(MOE), _plan(MOE, "--no-layout-search")
    assert wide["recommended"]["cost_per_hour_usd"] <= narrow["recommended"]["cost_per_hour_usd"]


@pytest.mark.parametrize(("extra", "expected"), [
    (["--quantization", "fp8"], {"weight_dtype": "fp8"}),
    (["--kv-cache-dtype", "fp8_e4m3"], {"kv_dtype": "fp8"}),
    (["--speculative-config", '{"method":"eagle","num_speculative_tokens":2}'],
     {"spec_tokens": 2, "spec_method": "heads"}),
])
def test_vllm_names_on_plan_mean_what_infersim_flags_mean(extra, expected):
    config = _plan(DENSE, "--tp", "1", *extra)["config"]
    assert {k: config[k] for k in expected} == expected


def test_vllm_layout_names_on_plan():
    assert _plan(MOE, "--enable-expert-parallel")["layouts"]["expert_parallel"] == [True]
    assert _plan(MOE, "--data-parallel-size", "2")["layouts"]["dp"] == [2]


def test_quantization_of_a_stored_checkpoint_is_served_as_stored():
    from sim.inputs.model import load_model
    from sim.inputs.vllm_names import weight_dtype_from_quantization

    assert weight_dtype_from_quantization("fp8", load_model("deepseek-r1")) == "auto"
    assert weight_dtype_from_quantization("mxfp4", load_model("gpt-oss-120b")) == "auto"
    assert weight_dtype_from_quantization("fp8", load_model("llama-3-8b")) == "fp8"


@pytest.mark.parametrize(("extra", "where"), [
    (["--quantization", "awq"], "--quantization"),
    (["--quantization", "fp8", "--weight-dtype", "bf16"], "--quantization"),
    (["--kv-cache-dtype", "fp8_e5m2"], "--kv-cache-dtype"),
    (["--speculative-config", '{"method":"ngram","num_speculative_tokens":2}'], "--speculative-config"),
    (["--speculative-config", '{"num_speculative_tokens":2,"prompt_lookup_max":4}'], "--speculative-config"),
    (["--speculative-config", "not json"], "--speculative-config"),
])
def test_vllm_names_refuse_what_is_not_modelled_in_one_line(extra, where):
    result = CliRunner().invoke(app, [*DENSE, *extra])
    assert result.exit_code == 2 and where in result.output and "Traceback" not in result.output


def test_the_engine_and_its_policy_follow_the_flag_then_the_config_yaml(tmp_path):
    from sim.planner.defaults import default_policies, plan_engine

    assert plan_engine(None, None) == "vllm" and default_policies("vllm", None) == "radix"
    assert plan_engine("none", None) is None and default_policies(None, None) == "chunked,radix"
    assert plan_engine("trtllm", None) == "trtllm" and default_policies("trtllm", None) == "chunked"
    yaml_file = tmp_path / "engine.yaml"
    yaml_file.write_text("engine: sglang\nmax_num_seqs: 64\n")
    assert plan_engine(None, yaml_file) is None  # the YAML's own engine is read by load_config
    assert default_policies(None, yaml_file) == "radix"
    plain = tmp_path / "plain.yaml"
    plain.write_text("max_num_seqs: 64\n")
    assert plan_engine(None, plain) == "vllm"


def test_an_mtp_speculative_config_round_trips_through_the_launch_line():
    from sim.inputs.vllm_names import speculative_config_knobs
    from sim.planner.launch_vllm import vllm_args

    knobs = speculative_config_knobs('{"method":"deepseek_mtp","num_speculative_tokens":1}')
    assert knobs == {"spec_tokens": 1, "spec_method": "mtp"}
    argv, _ = vllm_args(EngineConfig.model_validate({"model": "deepseek-r1", "tp": 8, "hardware": "h200", **knobs}))
    assert json.loads(_flags(shlex.join(argv))["--speculative-config"]) == {"method": "mtp",
                                                                             "num_speculative_tokens": 1}
