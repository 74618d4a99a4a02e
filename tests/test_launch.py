"""The launch line carries every simulated setting vLLM can express and names the rest (issue 25, blocker c).

Regression: a radix plan with a 64 GiB host prefix tier behind a prefix-affinity router printed
`vllm serve meta-llama/Llama-3.1-8B ... --enable-chunked-prefill --enable-prefix-caching`: no host
tier, no max-model-len, no router, and the spec's base checkpoint with no way to name another."""

from __future__ import annotations

import json
import shlex

from typer.testing import CliRunner

from sim.cli import app
from sim.inputs.config import EngineConfig
from sim.planner.launch import launch_command
from sim.planner.launch_vllm import LISTED_WHEN_SET, NOT_A_SERVER_FLAG, WRITTEN, vllm_args


def _flags(argv: list[str]) -> dict:
    out, i = {}, 3
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[argv[i]] = argv[i + 1]
            i += 2
        else:
            out[argv[i]] = True
            i += 1
    return out


def test_every_config_field_has_a_place_in_the_launch_line():
    placed = set(WRITTEN) | set(LISTED_WHEN_SET) | set(NOT_A_SERVER_FLAG)
    assert set(EngineConfig.model_fields) <= placed, set(EngineConfig.model_fields) - placed
    assert not set(WRITTEN) & set(LISTED_WHEN_SET)


def test_host_tier_prefix_caching_max_len_and_model_id_are_written():
    cfg = EngineConfig(model="llama-3.1-8b", policy="radix", cpu_cache_gib=64, router="prefix_affinity", tp=2,
                       chunk_size=2048, kv_dtype="fp8", seed=7)
    argv, missing = vllm_args(cfg, "meta-llama/Llama-3.1-8B-Instruct", replicas=3)
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    flags = _flags(argv)
    assert flags["--kv-offloading-backend"] == "native" and flags["--kv-offloading-size"] == "64"
    assert flags["--enable-prefix-caching"] and flags["--enable-chunked-prefill"]
    assert flags["--max-model-len"] == "131072"  # the spec's max_position_embeddings, as simulated
    assert flags["--long-prefill-token-threshold"] == "2048" and flags["--kv-cache-dtype"] == "fp8"
    assert flags["--tensor-parallel-size"] == "2" and flags["--seed"] == "7"
    assert flags["--disable-custom-all-reduce"]  # no preset: the simulation priced NCCL all-reduce
    assert any(m.startswith("router prefix_affinity across 3 replicas") and "prefix-aware" in m for m in missing)


def test_what_vllm_cannot_express_is_listed():
    static = EngineConfig(model="llama-3-8b", policy="static", batching_window_s=0.05, preemption_mode="swap")
    _, missing = vllm_args(static)
    assert any("static" in m for m in missing) and any("batching window 0.05 s" in m for m in missing)
    assert any("swap preemption" in m for m in missing)
    lpm = EngineConfig(model="llama-3-8b", policy="radix", radix_ordering="lpm", weight_dtype="int4",
                       spec_tokens=3)
    argv, missing = vllm_args(lpm)
    assert any("longest-prefix-first" in m for m in missing) and any("int4 weights" in m for m in missing)
    assert any("speculative heads (3 tokens)" in m for m in missing) and "--speculative-config" not in argv
    draft = EngineConfig(model="llama-3-70b", spec_tokens=4, spec_method="draft", spec_draft_model="llama-3-8b",
                         policy="chunked")
    argv, _ = vllm_args(draft)
    spec = json.loads(_flags(argv)["--speculative-config"])
    assert spec == {"model": "meta-llama/Meta-Llama-3-8B", "num_speculative_tokens": 4}


def test_launch_section_of_plan_json_is_a_parseable_command():
    cfg = EngineConfig(model="llama-3.1-8b", policy="radix", cpu_cache_gib=32)
    launch = launch_command(cfg, 2)
    assert shlex.split(launch["command"])[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert launch["model_id_from"] == "model spec" and launch["router"] == "round_robin"
    assert launch["not_expressible"] and launch["server"] == "vllm serve"


def test_plan_cli_writes_the_full_launch_line(tmp_path):
    config = tmp_path / "host.yaml"
    config.write_text("policy: radix\ncpu_cache_gib: 16\nrouter: prefix_affinity\n")
    result = CliRunner().invoke(app, [
        "plan", "-w", "mooncake_conversation", "-m", "llama-3.1-8b", "--target-qps", "0.5", "--slo", "ttft_p99=60s",
        "--slo", "tpot_p99=1s", "-H", "h100-sxm", "--tp", "1", "-p", "radix", "-c", str(config), "--max-requests",
        "60", "--workers", "1", "--no-verify", "--model-id", "meta-llama/Llama-3.1-8B-Instruct"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if "vllm serve" in line)
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in line and "--kv-offloading-size 16" in line
    assert "--enable-prefix-caching" in line and "--max-model-len 131072" in line
