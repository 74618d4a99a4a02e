"""A corpus of malformed (and a few edge-case but valid) inputs for every command and file type.

One case per line: `case(id, argv, expected, **files)`. `argv` is the command line after
`infersim`; `{d}` stands for the case's own folder, where `files` (name -> text or bytes) are
written first. `expected` is a piece of the one error line (exit 2), or `OK` for a documented
success. Run by tests/test_malformed_corpus.py, which also checks that nothing is left behind.
"""

# ruff: noqa: E501 (one case per line, however long)
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

OK = "<exit 0>"
ROOT = Path(__file__).resolve().parents[1]
MODEL = yaml.safe_load((ROOT / "sim" / "specs" / "models" / "llama-3-8b.yaml").read_text())
PROFILE = yaml.safe_load((ROOT / "hwprofiles" / "h100-sxm.yaml").read_text())
HF = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
      "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192}
MEASUREMENT_HEADER = ("op,m_tokens,n_out,k_in,batch_size,context_tokens,block_size,n_heads,n_kv_heads,head_dim,"
                      "payload_bytes,tp,dtype,time_s,time_std_s,n_repeats,device,source,torch_version,date\n")
GEMM_ROW = "qkv_proj,128,6144,4096,,,,,,,,1,bf16,0.0001,0.000001,5,h100,corpus,2.5,2026-11-30\n"
TRACE = "arrival_s,prompt_tokens,output_tokens\n0.0,100,10\n0.5,200,20\n1.0,50,5\n"  # generic CSV, valid


@dataclass
class Case:
    id: str
    argv: list[str]
    expected: str
    files: dict[str, str | bytes] = field(default_factory=dict)


def case(case_id: str, argv: str | list[str], expected: str, **files) -> Case:
    """`argv` as one string split at spaces, or as a list (arguments holding spaces or control characters)."""
    words = argv.split() if isinstance(argv, str) else argv
    return Case(case_id, words, expected, {name.replace("__", "."): text for name, text in files.items()})


def with_changes(base: dict, **changes) -> str:
    """`base` as YAML with dotted keys (`efficiency__memory`) set; a value of ... deletes the key."""
    data = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = data
        for parent in parents:
            node = node[parent]
        if value is ...:
            node.pop(key)
        else:
            node[key] = value
    return yaml.safe_dump(data)


def preset(**changes) -> str:
    return with_changes(PRESET, **changes)


def bench_json(**changes) -> str:
    """A `vllm bench serve --save-result` JSON; a value of ... drops the key."""
    return json.dumps({k: v for k, v in {**BENCH, **changes}.items() if v is not ...})


def bench_raw(key: str, token: str) -> str:
    """The bench JSON with `key`'s value written as `token` verbatim (1e400, NaN, -Infinity)."""
    return bench_json(**{key: "@@"}).replace('"@@"', token)


def vrow(**changes) -> str:
    """A validate CSV: header and one fixed-batch row, with `changes` to its cells."""
    row = {**VROW, **changes}
    return ",".join(row) + "\n" + ",".join(str(v) for v in row.values()) + "\n"


def alias_bomb(field: str, levels: int = 9) -> str:
    """A ~350-byte YAML whose `field` expands to 8**levels items through nested aliases."""
    text = "a0: &a0 [x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]\n"
    return text + f"{field}: *a{levels - 1}\n"


def model(**changes) -> str:
    return with_changes(MODEL, **changes)


def profile(**changes) -> str:
    return with_changes(PROFILE, **changes)


def hf(**changes) -> str:
    return json.dumps({**HF, **changes})


def spec(synthetic_yaml: str) -> str:
    return "synthetic:\n" + synthetic_yaml


PRESET = yaml.safe_load((ROOT / "sim" / "inputs" / "engines" / "presets" / "vllm@0.15.yaml").read_text())
BENCH = {"completed": 10, "total_input_tokens": 1000, "total_output_tokens": 1000, "output_throughput": 50.0,
         "request_rate": "inf"}
VROW = {"source": "corpus", "engine": "vllm", "model": "llama-3-8b", "gpu": "h100-sxm", "tp": 1, "weight_dtype": "bf16",
        "workload": "fixed_batch", "num_requests": 4, "metric": "mean_e2e_latency_ms", "value": 100, "input_len": 10,
        "output_len": 10}
CE = "calibrate engine {d}/b.json -o {d}/e.yaml -m llama-3-8b -H h100-sxm"
GOOD_SYNTH = "  arrival: {kind: poisson, rate_qps: 5}\n  lengths: {prompt: {kind: fixed, value: 50}, output: {kind: fixed, value: 5}}\n  n_requests: 4\n"
SIM = "simulate -t {d}/t.csv --max-requests 3"
MEM = "memory"

CASES = [
    # ---- model spec YAML / HF config.json (memory and simulate read them the same way) ----
    case("model-kv-heads-0", f"{MEM} -m {{d}}/m.yaml", "n_kv_heads", m__yaml=model(n_kv_heads=0)),
    case("model-heads-not-multiple-of-kv", f"{MEM} -m {{d}}/m.yaml", "multiple of n_kv_heads", m__yaml=model(n_kv_heads=5)),
    case("model-negative-layers", f"{MEM} -m {{d}}/m.yaml", "n_layers", m__yaml=model(n_layers=-1)),
    case("model-bool-hidden", f"{MEM} -m {{d}}/m.yaml", "true/false", m__yaml=model(hidden_size=True)),
    case("model-moe-topk-over-experts", f"{MEM} -m {{d}}/m.yaml", "experts_per_token", m__yaml=model(moe={"n_experts": 8, "experts_per_token": 9})),
    case("model-sliding-and-chunked-layers", f"{MEM} -m {{d}}/m.yaml", "mixing sliding and chunked",
         m__yaml=model(layer_attention=["full", "sliding", "chunked"] + ["full"] * 29, window_tokens=4096)),
    case("model-unknown-key", f"{MEM} -m {{d}}/m.yaml", "unknown field", m__yaml=model(n_expertz=3)),
    case("model-fractional-head-dim", f"{MEM} -m {{d}}/m.yaml", "head_dim", m__yaml=model(head_dim=1.5)),
    case("model-not-a-mapping", f"{MEM} -m {{d}}/m.yaml", "mapping", m__yaml="- a\n- b\n"),
    case("model-bad-yaml", f"{MEM} -m {{d}}/m.yaml", "not valid YAML", m__yaml="n_layers: [\n"),
    case("model-missing-file", f"{MEM} -m {{d}}/nope.yaml", "file not found"),
    case("model-unknown-name", f"{MEM} -m llama-9-1t", "unknown model"),
    case("model-in-simulate", f"{SIM} -m {{d}}/m.yaml", "n_kv_heads", m__yaml=model(n_kv_heads=0), t__csv=TRACE),
    case("hf-kv-heads-0", f"{MEM} -m {{d}}/config.json", "num_key_value_heads", config__json=hf(num_key_value_heads=0)),
    case("hf-hidden-not-multiple", f"{MEM} -m {{d}}/config.json", "hidden_size", config__json=hf(num_attention_heads=30, num_key_value_heads=6)),
    case("hf-bool-heads", f"{MEM} -m {{d}}/config.json", "num_attention_heads", config__json=hf(num_attention_heads=True)),
    case("hf-moe-topk", f"{MEM} -m {{d}}/config.json", "experts_per_token", config__json=hf(num_local_experts=8, num_experts_per_tok=9)),
    case("hf-bad-json", f"{MEM} -m {{d}}/config.json", "not valid JSON", config__json="{num_hidden_layers: 32"),
    # ---- hardware profile YAML ----
    case("profile-empty-paged-table", f"{MEM} -H {{d}}/p.yaml", "at least one", p__yaml=profile(efficiency__paged_attention_memory={})),
    case("profile-paged-not-pow2", f"{MEM} -H {{d}}/p.yaml", "power of two", p__yaml=profile(efficiency__paged_attention_memory={24: 0.7})),
    case("profile-paged-over-1", f"{MEM} -H {{d}}/p.yaml", "(0, 1]", p__yaml=profile(efficiency__paged_attention_memory={16: 1.5})),
    case("profile-paged-zero", f"{MEM} -H {{d}}/p.yaml", "(0, 1]", p__yaml=profile(efficiency__paged_attention_memory={16: 0.0})),
    case("profile-inf-bandwidth", f"{MEM} -H {{d}}/p.yaml", "finite", p__yaml=profile(memory__hbm_bandwidth_gb_s=float("inf"))),
    case("profile-nan-capacity", f"{MEM} -H {{d}}/p.yaml", "finite", p__yaml=profile(memory__hbm_capacity_gib=float("nan"))),
    case("profile-bool-capacity", f"{MEM} -H {{d}}/p.yaml", "true/false", p__yaml=profile(memory__hbm_capacity_gib=True)),
    case("profile-efficiency-over-1", f"{MEM} -H {{d}}/p.yaml", "efficiency.memory", p__yaml=profile(efficiency__memory=1.2)),
    case("profile-missing-compute", f"{MEM} -H {{d}}/p.yaml", "compute", p__yaml=profile(compute=...)),
    case("profile-unknown-name", f"{MEM} -H h900", "unknown profile"),
    case("profile-in-roofline", "roofline -H {d}/p.yaml", "power of two", p__yaml=profile(efficiency__paged_attention_memory={3: 0.5})),
    # ---- engine config YAML (simulate --config) ----
    case("config-negative-seed", f"{SIM} -c {{d}}/c.yaml", "seed", c__yaml="seed: -1\n", t__csv=TRACE),
    case("config-huge-seed", f"{SIM} -c {{d}}/c.yaml", "seed", c__yaml=f"seed: {2**64}\n", t__csv=TRACE),
    case("config-utilization-over-1", f"{SIM} -c {{d}}/c.yaml", "gpu_memory_utilization", c__yaml="gpu_memory_utilization: 1.5\n", t__csv=TRACE),
    case("config-block-size-0", f"{SIM} -c {{d}}/c.yaml", "block_size", c__yaml="block_size: 0\n", t__csv=TRACE),
    case("config-bool-max-num-seqs", f"{SIM} -c {{d}}/c.yaml", "true/false", c__yaml="max_num_seqs: true\n", t__csv=TRACE),
    case("config-unknown-policy", f"{SIM} -c {{d}}/c.yaml", "policy", c__yaml="policy: fifo\n", t__csv=TRACE),
    case("config-unknown-key", f"{SIM} -c {{d}}/c.yaml", "unknown field", c__yaml="max_batch: 3\n", t__csv=TRACE),
    case("config-replica-hardware-count", f"{SIM} -c {{d}}/c.yaml", "one profile per replica", c__yaml="replicas: 3\nreplica_hardware: [h100-sxm]\n", t__csv=TRACE),
    case("config-chunk-over-budget", f"{SIM} -c {{d}}/c.yaml", "chunk_size", c__yaml="policy: chunked\nchunk_size: 9000\n", t__csv=TRACE),
    case("config-inf-swap", f"{SIM} -c {{d}}/c.yaml", "finite", c__yaml="swap_space: .inf\n", t__csv=TRACE),
    case("config-huge-max-model-len", f"{SIM} -c {{d}}/c.yaml", "max_model_len", c__yaml="max_model_len: 1e30\n", t__csv=TRACE),
    # ---- command-line flags ----
    case("flag-simulate-max-num-seqs", f"{SIM} --max-num-seqs -3", "--max-num-seqs", t__csv=TRACE),
    case("flag-simulate-block-size-0", f"{SIM} --block-size 0", "--block-size", t__csv=TRACE),
    case("flag-simulate-max-requests-0", "simulate -t {d}/t.csv --max-requests 0", "--max-requests", t__csv=TRACE),
    case("flag-simulate-seed-negative", f"{SIM} --seed -1", "--seed", t__csv=TRACE),
    case("flag-simulate-tp-not-int", f"{SIM} --tp two", "--tp", t__csv=TRACE),
    case("flag-simulate-tp-not-divisor", f"{SIM} --tp 3", "--tp", t__csv=TRACE),
    case("flag-simulate-unknown-dtype", f"{SIM} --kv-dtype fp3", "fp3", t__csv=TRACE),
    # ---- parallel layouts (sim/inputs/layout/parallel.py, docs/parallelism.md) ----
    case("flag-simulate-pp-0", f"{SIM} --pp 0", "--pp", t__csv=TRACE),
    case("flag-simulate-pp-over-layers", f"{SIM} --pp 64", "layers", t__csv=TRACE),
    case("flag-simulate-ep-on-dense", f"{SIM} --ep 2", "no experts to shard", t__csv=TRACE),
    case("flag-simulate-dp-attention-on-dense", f"{SIM} --tp 2 --dp 2 --enable-dp-attention", "no experts to shard", t__csv=TRACE),
    case("flag-simulate-nodes-too-few", f"{SIM} --replicas 9 --nodes 1", "need 2 nodes", t__csv=TRACE),
    case("flag-simulate-moe-a2a-backend", f"{SIM} --moe-a2a-backend pplx", "--moe-a2a-backend", t__csv=TRACE),
    case("flag-simulate-moe-load-imbalance", f"{SIM} --moe-load-imbalance 0.5", "--moe-load-imbalance", t__csv=TRACE),
    case("config-pp-given-twice", f"{SIM} -c {{d}}/c.yaml", "same knob", c__yaml="pp: 2\npipeline_parallel_size: 4\n", t__csv=TRACE),
    case("profile-tp-across-nodes-without-nic", "roofline -m llama-3-70b --tp 16 -H {d}/p.yaml", "network_gb_s", p__yaml=profile(interconnect__network_gb_s=..., interconnect__network_latency_us=...)),
    case("profile-unknown-a2a-backend", f"{MEM} -H {{d}}/p.yaml", "all-to-all backend", p__yaml=profile(all_to_all={"mpi": {"dispatch": {8: {"latency_us": 1, "bus_gb_s": 10}}}})),
    case("flag-memory-max-num-seqs", "memory --max-num-seqs -3", "--max-num-seqs"),
    case("flag-memory-block-size-0", "memory --block-size 0", "--block-size"),
    case("flag-memory-utilization", "memory --gpu-memory-utilization 0", "--gpu-memory-utilization"),
    case("flag-roofline-block-size-0", "roofline --block-size 0", "--block-size"),
    case("flag-roofline-batch-0", "roofline --batch 0", "--batch"),
    case("flag-roofline-huge-context", "roofline --context 100000000000", "--context"),
    case("flag-sweep-max-requests-0", "sweep -g max_num_seqs=8 -t {d}/t.csv --max-requests 0 -o {d}/out", "--max-requests", t__csv=TRACE),
    case("flag-sweep-bad-grid", "sweep -g max_num_seqs -t {d}/t.csv -o {d}/out", "--grid", t__csv=TRACE),
    case("flag-sweep-bad-grid-value", "sweep -g block_size=0,16 -t {d}/t.csv -o {d}/out", "block_size", t__csv=TRACE),
    case("flag-plan-no-target", "plan -w {d}/t.csv", "--target-qps", t__csv=TRACE),
    case("flag-plan-bad-slo", "plan -w {d}/t.csv --target-qps 1 --slo ttft=fast -o {d}/out", "--slo", t__csv=TRACE),
    case("flag-describe-time-unit", "workload describe {d}/t.csv --format generic --time-unit hours", "--time-unit", t__csv=TRACE),
    case("flag-describe-columns", "workload describe {d}/t.csv --format generic --columns when", "--columns", t__csv=TRACE),
    case("flag-describe-format", "workload describe {d}/t.csv --format excel", "--format", t__csv=TRACE),
    case("flag-simulate-rate-scale-nan", f"{SIM} --rate-scale nan", "--rate-scale", t__csv=TRACE),
    case("flag-simulate-utilization-nan", f"{SIM} --gpu-memory-utilization nan", "finite", t__csv=TRACE),
    case("flag-simulate-huge-seed", f"{SIM} --seed 100000000000000000000000", "--seed", t__csv=TRACE),
    case("flag-simulate-config-is-folder", f"{SIM} -c {{d}}", "is not a file but a folder", t__csv=TRACE),
    case("flag-simulate-trace-is-folder", "simulate -t {d}", "not a file"),
    case("flag-plan-workers-0", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --workers 0", "--workers", t__csv=TRACE),
    case("flag-plan-top-negative", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --top -1", "--top", t__csv=TRACE),
    case("flag-plan-target-nan", "plan -w {d}/t.csv --target-qps nan --slo ttft_p99=1s", "--target-qps", t__csv=TRACE),
    case("flag-plan-seed-negative", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --seed -1", "--seed", t__csv=TRACE),
    case("flag-sweep-qps-inf", "sweep -g qps=inf -t {d}/t.csv -o {d}/out", "finite", t__csv=TRACE),
    case("flag-sweep-bool-value", "sweep -g max_num_seqs=true -t {d}/t.csv -o {d}/out", "true/false", t__csv=TRACE),
    case("flag-describe-rate-nan", "workload describe {d}/t.csv --lengths-rate-qps nan", "--lengths-rate-qps", t__csv="num_prefill_tokens,num_decode_tokens\n10,5\n"),
    case("flag-sample-seed-negative", "workload sample {d}/s.yaml --out {d}/o.jsonl --seed -1", "--seed", s__yaml=spec(GOOD_SYNTH)),
    case("flag-sample-out-is-folder", "workload sample {d}/s.yaml --out {d}", "is a folder", s__yaml=spec(GOOD_SYNTH)),
    case("flag-calibrate-budget-negative", "calibrate run --device cpu --quick --time-budget-s -1 --out {d}/p.yaml", "--time-budget-s"),
    case("flag-profiles-extra-argument", "profiles h100-sxm", "h100-sxm"),
    case("flag-models-unknown-option", "models --jsn", "--jsn"),
    case("out-is-a-plan-folder", f"{SIM} -o {{d}}/plan", "plan.json", t__csv=TRACE, **{"plan/plan.json": "{}"}),
    case("validate-not-a-measured-table", "validate {d}/c.csv", "missing column", c__csv="a,b\n1,2\n"),
    case("validate-bad-split", "validate --split xyz", "--split"),
    case("validate-unknown-engine", "validate --engine nope", "--engine"),
    case("validate-max-sim-requests-0", "validate --max-sim-requests 0", "--max-sim-requests"),
    case("calibrate-engine-bad-table", "calibrate engine {d}/c.csv -o {d}/e.yaml", "missing column", c__csv="a,b\n1,2\n"),
    case("calibrate-engine-tp-0", "calibrate engine {d}/c.csv -o {d}/e.yaml --tp 0", "--tp", c__csv="a,b\n1,2\n"),
    case("engine-preset-yaml-missing-name", f"{SIM} --engine {{d}}/e.yaml", "name", e__yaml="foo: 1\n", t__csv=TRACE),
    case("engines-extra-argument", "engines extra", "extra"),
    case("workload-schema-unknown-option", "workload schema --jsn", "--jsn"),
    # ---- trace CSV ----
    case("csv-empty", "workload describe {d}/t.csv", "empty", t__csv=""),
    case("csv-unknown-header", "workload describe {d}/t.csv", "no known format", t__csv="a,b,c\n1,2,3\n"),
    case("csv-length-wraps-int64", "workload describe {d}/t.csv", "10,000,000", t__csv="arrival_s,prompt_tokens,output_tokens\n0,1e30,5\n"),
    case("csv-negative-output", "workload describe {d}/t.csv", "output_tokens", t__csv="arrival_s,prompt_tokens,output_tokens\n0,10,-5\n"),
    case("csv-zero-output", "workload describe {d}/t.csv", "num_decode_tokens", t__csv="arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,0\n"),
    case("csv-text-in-number", "workload describe {d}/t.csv", "row 1", t__csv="arrival_s,prompt_tokens,output_tokens\n0,ten,5\n"),
    case("csv-weak-header", "workload describe {d}/t.csv", "--format", t__csv="arrived_at,num_prefill_tokens\n0,10\n"),
    case("csv-binary", "workload describe {d}/t.csv", "binary", t__csv=b"\x00\x01\x02arrival"),
    case("csv-not-utf8", "workload describe {d}/t.csv", "UTF-8", t__csv=b"arrival_s,prompt_tokens,output_tokens\n0,1\xff,5\n"),
    case("csv-infinite-time", "workload describe {d}/t.csv", "finite", t__csv="arrival_s,prompt_tokens,output_tokens\ninf,10,5\n"),
    case("csv-missing-file", "workload describe {d}/none.csv", "none.csv"),
    case("csv-in-simulate", "simulate -t {d}/t.csv -o {d}/out", "10,000,000", t__csv="arrival_s,prompt_tokens,output_tokens\n0,1e30,5\n"),
    # ---- trace JSONL ----
    case("jsonl-true-is-not-1-token", "workload describe {d}/t.jsonl", "true", t__jsonl='{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"timestamp": 1, "input_length": 10, "output_length": true}\n'),
    case("jsonl-bad-line", "workload describe {d}/t.jsonl", ":2", t__jsonl='{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"timestamp": 1,\n'),
    case("jsonl-huge-length", "workload describe {d}/t.jsonl", "input_length", t__jsonl='{"timestamp": 0, "input_length": 1e30, "output_length": 5}\n'),
    case("jsonl-hash-ids-not-list", "workload describe {d}/t.jsonl", "hash_ids", t__jsonl='{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": 7}\n'),
    case("jsonl-bool-hash-id", "workload describe {d}/t.jsonl", "hash_ids", t__jsonl='{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1, true]}\n'),
    case("model-huge-context", f"{MEM} -m {{d}}/m.yaml", "max_position_embeddings", m__yaml=model(max_position_embeddings=10**12)),
    case("measure-fit-out-is-folder", "calibrate fit {d}/m.csv --out {d}/p.yaml", "is a folder", m__csv=MEASUREMENT_HEADER + GEMM_ROW, **{"p.yaml/keep": "x"}),
    case("jsonl-canonical-negative-time", "workload describe {d}/t.jsonl", ">= 0", t__jsonl='{"arrival_s": -1, "prompt_tokens": 10, "output_tokens": 5}\n'),
    case("jsonl-unknown-keys", "workload describe {d}/t.jsonl", "match no known format", t__jsonl='{"a": 1}\n'),
    # ---- workload spec YAML ----
    case("spec-lognormal-mean-overflow", "workload describe {d}/s.yaml", "mean", s__yaml=spec(GOOD_SYNTH.replace("{kind: fixed, value: 50}", "{kind: lognormal, mean: 1e300, sigma: 1}"))),
    case("spec-lognormal-sigma", "workload describe {d}/s.yaml", "sigma", s__yaml=spec(GOOD_SYNTH.replace("{kind: fixed, value: 50}", "{kind: lognormal, mean: 100, sigma: 1000}"))),
    case("spec-huge-n-requests", "workload describe {d}/s.yaml", "n_requests", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "n_requests: 1e13"))),
    case("spec-huge-n-requests-int", "workload describe {d}/s.yaml", "n_requests", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "n_requests: 10000000000000"))),
    case("spec-rate-times-duration", "workload describe {d}/s.yaml", "duration_s", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "duration_s: 1e9"))),
    case("spec-inf-rate", "workload describe {d}/s.yaml", "finite", s__yaml=spec(GOOD_SYNTH.replace("rate_qps: 5", "rate_qps: .inf"))),
    case("spec-bool-token-count", "workload describe {d}/s.yaml", "true/false", s__yaml=spec(GOOD_SYNTH.replace("value: 5}", "value: true}"))),
    case("spec-huge-fixed-length", "workload describe {d}/s.yaml", "value", s__yaml=spec(GOOD_SYNTH.replace("value: 5}", "value: 100000000000}"))),
    case("spec-uniform-reversed", "workload describe {d}/s.yaml", "high", s__yaml=spec(GOOD_SYNTH.replace("{kind: fixed, value: 50}", "{kind: uniform, low: 9, high: 3}"))),
    case("spec-unknown-kind", "workload describe {d}/s.yaml", "unknown kind", s__yaml=spec(GOOD_SYNTH.replace("kind: poisson", "kind: hawkes"))),
    case("spec-negative-seed", "workload describe {d}/s.yaml", "seed", s__yaml=spec(GOOD_SYNTH) + "seed: -5\n"),
    case("spec-window-reversed", "workload describe {d}/s.yaml", "time_window_s", s__yaml=spec(GOOD_SYNTH) + "transforms: {time_window_s: [10, 5]}\n"),
    case("spec-trace-and-synthetic", "workload describe {d}/s.yaml", "exactly one", s__yaml=spec(GOOD_SYNTH) + "trace: t.csv\n"),
    case("spec-in-simulate", "simulate -t {d}/s.yaml -o {d}/out", "n_requests", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "n_requests: 0"))),
    case("spec-in-sample", "workload sample {d}/s.yaml --out {d}/out.jsonl", "mean", s__yaml=spec(GOOD_SYNTH.replace("{kind: fixed, value: 50}", "{kind: lognormal, mean: -3, sigma: 1}"))),
    case("sample-out-folder-missing", "workload sample {d}/s.yaml --out {d}/no/out.jsonl", "does not exist", s__yaml=spec(GOOD_SYNTH)),
    # ---- measurement CSV (calibrate fit / report) ----
    case("measure-attention-heads-0", "calibrate report h100-sxm {d}/m.csv", "n_heads", m__csv=MEASUREMENT_HEADER + "decode_attention,4,,,4,100,16,0,8,128,,1,bf16,0.0001,0.000001,5,h100,corpus,2.5,2026-11-30\n"),
    case("measure-heads-not-multiple", "calibrate report h100-sxm {d}/m.csv", "n_heads", m__csv=MEASUREMENT_HEADER + "decode_attention,4,,,4,100,16,32,5,128,,1,bf16,0.0001,0.000001,5,h100,corpus,2.5,2026-11-30\n"),
    case("measure-negative-time", "calibrate report h100-sxm {d}/m.csv", "time_s", m__csv=MEASUREMENT_HEADER + GEMM_ROW.replace("0.0001,", "-0.0001,")),
    case("measure-unknown-op", "calibrate report h100-sxm {d}/m.csv", "op", m__csv=MEASUREMENT_HEADER + GEMM_ROW.replace("qkv_proj", "softmax")),
    case("measure-empty", "calibrate report h100-sxm {d}/m.csv", "m.csv", m__csv=""),
    case("measure-fit-out-not-yaml", "calibrate fit {d}/m.csv --out {d}/out.txt", "--out", m__csv=MEASUREMENT_HEADER + GEMM_ROW),
    case("measure-plot-is-folder", "calibrate report h100-sxm {d}/m.csv --plot {d}/x.png", "--plot", m__csv=MEASUREMENT_HEADER + GEMM_ROW, **{"x.png/keep": "x"}),
    case("measure-plot-folder-missing", "calibrate report h100-sxm {d}/m.csv --plot {d}/no/x.png", "--plot", m__csv=MEASUREMENT_HEADER + GEMM_ROW),
    case("measure-vidur-n-head-0", "calibrate report h100-sxm {d}/mlp.csv", "n_head", mlp__csv="n_head,n_kv_head,n_embd,n_expanded_embd,use_gated_mlp,num_tokens,num_tensor_parallel_workers,time_stats.attn_pre_proj.median,time_stats.attn_pre_proj.std,time_stats.attn_post_proj.median,time_stats.attn_post_proj.std,time_stats.mlp_up_proj.median,time_stats.mlp_up_proj.std,time_stats.mlp_down_proj.median,time_stats.mlp_down_proj.std\n0,32,4096,11008,True,128,1,0.1,0.01,0.1,0.01,0.1,0.01,0.1,0.01\n"),
    # ---- the --out folder ----
    case("out-is-a-file", f"{SIM} -o {{d}}/t.csv", "not a directory", t__csv=TRACE),
    case("out-under-a-file", f"{SIM} -o {{d}}/t.csv/run", "is a file", t__csv=TRACE),
    case("out-holds-other-files", f"{SIM} -o {{d}}/mine", "not from a run", t__csv=TRACE, **{"mine/notes": b"keep me"}),
    case("plan-out-is-a-file", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=2s -H h100-sxm --tp 1 -p chunked -o {d}/t.csv", "not a directory", t__csv=TRACE),
    case("sweep-out-is-a-file", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/t.csv", "not a directory", t__csv=TRACE),
    case("sweep-fails-at-first-point", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --no-plots", "10,000,000", t__csv="arrival_s,prompt_tokens,output_tokens\n0,1e30,5\n"),
    # ---- documented successes (edge cases that are valid) ----
    case("ok-bom-azure-csv", "workload describe {d}/t.csv", OK, t__csv="\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:50.99,396,109\n"),
    case("ok-block-size-not-power-of-two", f"{SIM} --block-size 24 -o {{d}}/out", OK, t__csv=TRACE),
    case("ok-memory-block-size-24", "memory --block-size 24", OK),
    case("ok-one-output-token", "workload describe {d}/t.csv", OK, t__csv="arrival_s,prompt_tokens,output_tokens\n0,10,1\n"),
    case("ok-hf-without-kv-heads-is-mha", f"{MEM} -m {{d}}/config.json", OK, config__json=json.dumps({k: v for k, v in HF.items() if k != "num_key_value_heads"})),
    # ==== issue 26: nothing lost, nothing unbounded ====
    # ---- --bench key=values (strict numbers, one budget) ----
    case("bench-requests-1e13", "simulate --bench requests=1e13,isl=10,osl=10", "--bench: requests: must be a whole number"),
    case("bench-isl-wraps-int64", "simulate --bench requests=2,isl=1e19,osl=4", "--bench: isl: must be a whole number"),
    case("bench-isl-int-text-1e19", "simulate --bench requests=2,isl=10000000000000000000,osl=4", "--bench: isl"),
    case("bench-think-nan", "simulate --bench requests=2,concurrency=1,isl=5,osl=5,think_s=nan", "--bench: think_s"),
    case("bench-think-inf", "simulate --bench requests=2,concurrency=1,isl=5,osl=5,think_s=inf", "--bench: think_s"),
    case("bench-think-negative", "simulate --bench requests=2,concurrency=1,isl=5,osl=5,think_s=-1", "--bench: think_s"),
    case("bench-think-cv-nan", "simulate --bench requests=2,concurrency=1,isl=5,osl=5,think_cv=nan", "--bench: think_cv"),
    case("bench-seed-negative", "simulate --bench requests=2,isl=5,osl=5,seed=-1", "--bench: seed"),
    case("bench-seed-2-64", f"simulate --bench requests=2,isl=5,osl=5,seed={2**64}", "--bench: seed"),
    case("bench-repeated-key", "simulate --bench requests=2,isl=5,isl=7,osl=5", "isl: given twice"),
    case("bench-text-value", "simulate --bench requests=2,isl=abc,osl=5", "--bench: isl"),
    case("bench-fractional-count", "simulate --bench requests=2.5,isl=5,osl=5", "--bench: requests"),
    case("bench-batch-0", "simulate --bench batch=0,isl=5,osl=5", "--bench: batch"),
    case("bench-osl-negative", "simulate --bench batch=2,isl=5,osl=-5", "--bench: osl"),
    case("bench-osl-inf", "simulate --bench batch=2,isl=5,osl=inf", "--bench: osl"),
    case("bench-empty-value", "simulate --bench batch=2,isl=,osl=5", "--bench: isl"),
    case("bench-jitter-1", "simulate --bench requests=2,isl=5,osl=5,jitter=1", "--bench: jitter"),
    case("bench-jitter-negative", "simulate --bench requests=2,isl=5,osl=5,jitter=-0.1", "--bench: jitter"),
    case("bench-jitter-past-max-tokens", "simulate --bench requests=2,isl=10000000,osl=5,jitter=0.5", "isl x (1 + jitter)"),
    case("bench-unknown-key", "simulate --bench requests=2,isl=5,osl=5,rate=3", "--bench: rate"),
    case("bench-no-equals", "simulate --bench requests", "--bench: requests"),
    case("bench-tokens-product", "simulate --bench requests=10000000,isl=1000000,osl=1", "requests x (isl + osl)"),
    case("bench-batch-tokens-product", "simulate --bench batch=10000000,isl=10000000,osl=10000000", "batch x (isl + osl)"),
    case("bench-no-isl", "simulate --bench requests=2,osl=5", "--bench: isl: required"),
    case("bench-batch-and-requests", "simulate --bench batch=2,requests=2,isl=5,osl=5", "exactly one"),
    case("bench-with-trace", "simulate --bench batch=2,isl=5,osl=5 -t {d}/t.csv", "--bench", t__csv=TRACE),
    case("bench-think-without-concurrency", "simulate --bench requests=2,isl=5,osl=5,think_s=1", "need concurrency"),
    case("bench-batch-with-concurrency", "simulate --bench batch=2,concurrency=2,isl=5,osl=5", "a fixed batch"),
    case("bench-concurrency-0", "simulate --bench requests=2,concurrency=0,isl=5,osl=5", "--bench: concurrency"),
    case("bench-bool-value", "simulate --bench requests=true,isl=5,osl=5", "--bench: requests"),
    # ---- vllm bench serve JSON (calibrate engine) ----
    case("bjson-completed-text", CE, "b.json: completed: must be a whole number", b__json=bench_json(completed="abc")),
    case("bjson-completed-null", CE, "b.json: completed", b__json=bench_json(completed=None)),
    case("bjson-completed-1e400", CE, "b.json: completed", b__json=bench_raw("completed", "1e400")),
    case("bjson-completed-0", CE, "b.json: completed", b__json=bench_json(completed=0)),
    case("bjson-completed-nan", CE, "b.json: completed", b__json=bench_raw("completed", "NaN")),
    case("bjson-completed-negative", CE, "b.json: completed", b__json=bench_json(completed=-5)),
    case("bjson-completed-fraction", CE, "b.json: completed", b__json=bench_json(completed=2.5)),
    case("bjson-completed-bool", CE, "b.json: completed", b__json=bench_json(completed=True)),
    case("bjson-completed-huge", CE, "b.json: completed", b__json=bench_json(completed=10**13)),
    case("bjson-throughput-negative", CE, "b.json: output_throughput: must be a finite number > 0", b__json=bench_json(output_throughput=-5)),
    case("bjson-throughput-0", CE, "b.json: output_throughput", b__json=bench_json(output_throughput=0)),
    case("bjson-throughput-inf", CE, "b.json: output_throughput", b__json=bench_raw("output_throughput", "Infinity")),
    case("bjson-throughput-1e400", CE, "b.json: output_throughput", b__json=bench_raw("output_throughput", "1e400")),
    case("bjson-throughput-text", CE, "b.json: output_throughput", b__json=bench_json(output_throughput="fast")),
    case("bjson-input-tokens-null", CE, "b.json: total_input_tokens", b__json=bench_json(total_input_tokens=None)),
    case("bjson-output-tokens-negative", CE, "b.json: total_output_tokens", b__json=bench_json(total_output_tokens=-1)),
    case("bjson-tokens-per-request-too-long", CE, "b.json: total_input_tokens", b__json=bench_json(completed=1, total_input_tokens=10**9)),
    case("bjson-repeated-key", CE, "b.json: completed: given twice", b__json='{"completed": 10, "completed": 11, "total_input_tokens": 10, "total_output_tokens": 10, "output_throughput": 5}'),
    case("bjson-not-an-object", CE, "b.json: must hold a JSON object", b__json="[1, 2]"),
    case("bjson-bad-json", CE, "b.json: cannot read", b__json='{"completed": '),
    case("bjson-missing-key", CE, "missing key(s) output_throughput", b__json=bench_json(output_throughput=...)),
    case("bjson-finite-rate", CE, "b.json: request_rate", b__json=bench_json(request_rate=10)),
    case("bjson-concurrency-0", CE, "b.json: max_concurrency", b__json=bench_json(max_concurrency=0)),
    case("bjson-concurrency-text", CE, "b.json: max_concurrency", b__json=bench_json(max_concurrency="many")),
    case("bjson-e2el-negative", CE, "b.json: mean_e2el_ms", b__json=bench_json(mean_e2el_ms=-1)),
    case("bjson-e2el-null", CE, "b.json: mean_e2el_ms", b__json=bench_json(mean_e2el_ms=None)),
    case("bjson-no-model", "calibrate engine {d}/b.json -o {d}/e.yaml", "--model/--hardware", b__json=bench_json()),
    case("bjson-in-calibrate-engine-out-txt", "calibrate engine {d}/b.json -o {d}/e.txt -m llama-3-8b -H h100-sxm", "must end in .yaml", b__json=bench_json()),
    case("bjson-out-is-folder", "calibrate engine {d}/b.json -o {d}/e.yaml -m llama-3-8b -H h100-sxm", "is a folder", b__json=bench_json(), **{"e.yaml/keep": "x"}),
    case("bjson-out-folder-missing", "calibrate engine {d}/b.json -o {d}/no/e.yaml -m llama-3-8b -H h100-sxm", "does not exist", b__json=bench_json()),
    # ---- validate CSV (validate, calibrate engine) ----
    case("vcsv-header-only", "validate {d}/v.csv", "v.csv: has a header but no rows", v__csv=",".join(VROW) + "\n"),
    case("vcsv-empty", "validate {d}/v.csv", "v.csv: cannot read CSV", v__csv=""),
    case("vcsv-binary", "validate {d}/v.csv", "v.csv", v__csv=b"\x00\xff\x00\xfe"),
    case("vcsv-value-text", "validate {d}/v.csv", "v.csv:2: value: must be a finite number > 0", v__csv=vrow(value="abc")),
    case("vcsv-value-inf", "validate {d}/v.csv", "v.csv:2: value", v__csv=vrow(value="inf")),
    case("vcsv-value-nan", "validate {d}/v.csv", "v.csv:2: value", v__csv=vrow(value="nan")),
    case("vcsv-value-1e400", "validate {d}/v.csv", "v.csv:2: value", v__csv=vrow(value="1e400")),
    case("vcsv-value-0", "validate {d}/v.csv", "v.csv:2: value", v__csv=vrow(value=0)),
    case("vcsv-value-negative", "validate {d}/v.csv", "v.csv:2: value", v__csv=vrow(value=-3)),
    case("vcsv-value-empty", "validate {d}/v.csv", "v.csv:2: value", v__csv=vrow(value="")),
    case("vcsv-tp-0", "validate {d}/v.csv", "v.csv:2: tp", v__csv=vrow(tp=0)),
    case("vcsv-tp-1e400", "validate {d}/v.csv", "v.csv:2: tp", v__csv=vrow(tp="1e400")),
    case("vcsv-tp-fraction", "validate {d}/v.csv", "v.csv:2: tp", v__csv=vrow(tp=1.5)),
    case("vcsv-num-requests-1e12", "validate {d}/v.csv", "v.csv:2: num_requests", v__csv=vrow(num_requests="1e12")),
    case("vcsv-num-requests-nan", "validate {d}/v.csv", "v.csv:2: num_requests", v__csv=vrow(num_requests="nan")),
    case("vcsv-input-len-int64", "validate {d}/v.csv", "v.csv:2: input_len", v__csv=vrow(input_len="10000000000000000000")),
    case("vcsv-output-len-0", "validate {d}/v.csv", "v.csv:2: output_len", v__csv=vrow(output_len=0)),
    case("vcsv-tokens-product", "validate {d}/v.csv", "num_requests x (input_len + output_len)", v__csv=vrow(num_requests=10000000, input_len=10000000)),
    case("vcsv-closed-loop-no-concurrency", "validate {d}/v.csv", "v.csv:2: concurrency: required", v__csv=vrow(workload="closed_loop")),
    case("vcsv-concurrency-negative", "validate {d}/v.csv", "v.csv:2: concurrency", v__csv=vrow(workload="closed_loop", concurrency=-1)),
    case("vcsv-unknown-workload", "validate {d}/v.csv", "v.csv:2: workload", v__csv=vrow(workload="burst")),
    case("vcsv-unknown-metric", "validate {d}/v.csv", "v.csv:2: metric", v__csv=vrow(metric="p99")),
    case("vcsv-bad-split", "validate {d}/v.csv", "v.csv:2: split", v__csv=vrow(split="train")),
    case("vcsv-repeated-column", "validate {d}/v.csv", "v.csv: value: column given twice", v__csv=",".join(VROW) + ",value\n" + ",".join(str(v) for v in VROW.values()) + ",5\n"),
    case("vcsv-unknown-column", "validate {d}/v.csv", "unknown column(s) latency", v__csv=vrow(latency=3)),
    case("vcsv-engine-args-not-pairs", "validate {d}/v.csv", "v.csv:2: engine_args", v__csv=vrow(engine_args="chunked")),
    case("vcsv-engine-args-unknown-key", "validate {d}/v.csv", "v.csv: case v:2: foo: unknown field", v__csv=vrow(engine_args="foo=1")),
    case("vcsv-engine-args-bad-value", "validate {d}/v.csv", "v.csv: case v:2: max_num_seqs", v__csv=vrow(engine_args="max_num_seqs=abc")),
    case("vcsv-unknown-model", "validate {d}/v.csv", "model", v__csv=vrow(model="gpt-9")),
    case("vcsv-in-calibrate-engine", "calibrate engine {d}/v.csv -o {d}/e.yaml", "v.csv:2: value", v__csv=vrow(value="nan")),
    case("vcsv-missing-file", "validate {d}/none.csv", "none.csv"),
    # ---- engine preset YAML (simulate/validate --engine FILE) ----
    case("preset-per-step-inf", f"{SIM} --engine {{d}}/e.yaml", "overhead.per_step_us", t__csv=TRACE, e__yaml=preset(overhead__per_step_us=float("inf"))),
    case("preset-per-step-nan", f"{SIM} --engine {{d}}/e.yaml", "overhead.per_step_us", t__csv=TRACE, e__yaml=preset(overhead__per_step_us=float("nan"))),
    case("preset-per-step-bool", f"{SIM} --engine {{d}}/e.yaml", "true/false", t__csv=TRACE, e__yaml=preset(overhead__per_step_us=True)),
    case("preset-per-step-negative", f"{SIM} --engine {{d}}/e.yaml", "overhead.per_step_us", t__csv=TRACE, e__yaml=preset(overhead__per_step_us=-1)),
    case("preset-per-step-huge", f"{SIM} --engine {{d}}/e.yaml", "overhead.per_step_us", t__csv=TRACE, e__yaml=preset(overhead__per_step_us=1e300)),
    case("preset-per-token-text", f"{SIM} --engine {{d}}/e.yaml", "overhead.per_token_us", t__csv=TRACE, e__yaml=preset(overhead__per_token_us="fast")),
    case("preset-residue-inf", f"{SIM} --engine {{d}}/e.yaml", "overhead.residue_us", t__csv=TRACE, e__yaml=preset(overhead__residue_us=float("inf"))),
    case("preset-capture-1e18", f"{SIM} --engine {{d}}/e.yaml", "cuda_graph.capture_sizes", t__csv=TRACE, e__yaml=preset(cuda_graph__capture_sizes=[1, 10**18])),
    case("preset-capture-many", f"{SIM} --engine {{d}}/e.yaml", "cuda_graph.capture_sizes", t__csv=TRACE, e__yaml=preset(cuda_graph__capture_sizes=list(range(1, 5000)))),
    case("preset-capture-unsorted", f"{SIM} --engine {{d}}/e.yaml", "strictly increasing", t__csv=TRACE, e__yaml=preset(cuda_graph__capture_sizes=[8, 4])),
    case("preset-capture-cap-alone", f"{SIM} --engine {{d}}/e.yaml", "capture_cap needs a cap", t__csv=TRACE, e__yaml=preset(cuda_graph__capture_cap=True, cuda_graph__max_per_seq=None)),
    case("preset-capture-bool", f"{SIM} --engine {{d}}/e.yaml", "true/false", t__csv=TRACE, e__yaml=preset(cuda_graph__capture_sizes=[1, True])),
    case("preset-capture-zero", f"{SIM} --engine {{d}}/e.yaml", "cuda_graph.capture_sizes", t__csv=TRACE, e__yaml=preset(cuda_graph__capture_sizes=[0, 4])),
    case("preset-utilization-over-1", f"{SIM} --engine {{d}}/e.yaml", "scheduling.gpu_memory_utilization", t__csv=TRACE, e__yaml=preset(scheduling__gpu_memory_utilization=1.5)),
    case("preset-max-num-seqs-bool", f"{SIM} --engine {{d}}/e.yaml", "true/false", t__csv=TRACE, e__yaml=preset(scheduling__max_num_seqs=True)),
    case("preset-unknown-policy", f"{SIM} --engine {{d}}/e.yaml", "scheduling.policy", t__csv=TRACE, e__yaml=preset(scheduling__policy="fifo")),
    case("preset-unknown-key", f"{SIM} --engine {{d}}/e.yaml", "unknown field", t__csv=TRACE, e__yaml=preset(speed=3)),
    case("preset-no-sources", f"{SIM} --engine {{d}}/e.yaml", "sources", t__csv=TRACE, e__yaml=preset(sources=[])),
    case("preset-unknown-kv-dtype", f"{SIM} --engine {{d}}/e.yaml", "kv.dtype", t__csv=TRACE, e__yaml=preset(kv__dtype="fp3")),
    case("preset-missing-overhead", f"{SIM} --engine {{d}}/e.yaml", "overhead", t__csv=TRACE, e__yaml=preset(overhead=...)),
    case("preset-not-a-mapping", f"{SIM} --engine {{d}}/e.yaml", "mapping", t__csv=TRACE, e__yaml="- vllm\n"),
    case("preset-missing-file", f"{SIM} --engine {{d}}/nope.yaml", "file not found", t__csv=TRACE),
    case("preset-in-validate", "validate --engine {d}/e.yaml", "overhead.per_step_us", e__yaml=preset(overhead__per_step_us=float("inf"))),
    case("preset-in-calibrate-engine", "calibrate engine {d}/v.csv --engine {d}/e.yaml -o {d}/o.yaml", "per_step_us: must be a number or text, not true/false", v__csv=vrow(), e__yaml=preset(overhead__per_step_us=True)),
    # ---- YAML aliases: refused by every reader (a 350-byte alias bomb expands to 1e8 nodes) ----
    case("alias-bomb-config", f"{SIM} -c {{d}}/c.yaml", "aliases (*name) are not accepted", t__csv=TRACE, c__yaml=alias_bomb("replica_hardware")),
    case("alias-bomb-preset", f"{SIM} --engine {{d}}/e.yaml", "aliases", t__csv=TRACE, e__yaml=alias_bomb("sources")),
    case("alias-bomb-model", f"{MEM} -m {{d}}/m.yaml", "aliases", m__yaml=alias_bomb("layers")),
    case("alias-bomb-profile", f"{MEM} -H {{d}}/p.yaml", "aliases", p__yaml=alias_bomb("sources")),
    case("alias-bomb-spec", "workload describe {d}/s.yaml", "aliases", s__yaml=alias_bomb("synthetic")),
    case("alias-bomb-spec-in-simulate", "simulate -t {d}/s.yaml", "aliases", s__yaml=alias_bomb("synthetic")),
    case("alias-bomb-sweep-base", "sweep --base {d}/b.yaml -g max_num_seqs=8 -t {d}/t.csv -o {d}/out", "aliases", t__csv=TRACE, b__yaml=alias_bomb("replica_hardware")),
    case("alias-bomb-plan-config", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s -c {d}/c.yaml", "aliases", t__csv=TRACE, c__yaml=alias_bomb("replica_hardware")),
    case("alias-small-config", f"{SIM} -c {{d}}/c.yaml", "aliases", t__csv=TRACE, c__yaml="x: &n 8\nmax_num_seqs: *n\n"),
    case("alias-bomb-disagg-config", "disagg -t {d}/t.csv -c {d}/c.yaml", "aliases", t__csv=TRACE, c__yaml=alias_bomb("replica_hardware")),
    # ---- keys and columns given twice: refused, never "the last one wins" ----
    case("repeated-key-config", f"{SIM} -c {{d}}/c.yaml", "key 'max_num_seqs' given twice, line 2", t__csv=TRACE, c__yaml="max_num_seqs: 8\nmax_num_seqs: 16\n"),
    case("repeated-key-preset", f"{SIM} --engine {{d}}/e.yaml", "given twice", t__csv=TRACE, e__yaml=preset() + "name: again\n"),
    case("repeated-key-nested-preset", f"{SIM} --engine {{d}}/e.yaml", "key 'per_step_us' given twice", t__csv=TRACE, e__yaml=preset().replace("  per_step_us:", "  per_step_us: 1.0\n  per_step_us:", 1)),
    case("repeated-key-model", f"{MEM} -m {{d}}/m.yaml", "given twice", m__yaml=model() + "n_layers: 2\n"),
    case("repeated-key-profile", f"{MEM} -H {{d}}/p.yaml", "given twice", p__yaml=profile() + "name: other\n"),
    case("repeated-key-spec", "workload describe {d}/s.yaml", "key 'n_requests' given twice", s__yaml=spec(GOOD_SYNTH + "  n_requests: 8\n")),
    case("repeated-column-trace-csv", "workload describe {d}/t.csv", "prompt_tokens: column given twice", t__csv="arrival_s,prompt_tokens,prompt_tokens,output_tokens\n0,10,12,5\n"),
    case("repeated-column-trace-in-simulate", "simulate -t {d}/t.csv -o {d}/out", "column given twice", t__csv="arrival_s,prompt_tokens,output_tokens,output_tokens\n0,10,5,6\n"),
    # ---- --out D never loses a user's file ----
    case("out-dot-files-only", f"{SIM} -o {{d}}/proj", "not from a run (.env, .git)", t__csv=TRACE, **{"proj/.git/HEAD": "ref: refs/heads/main\n", "proj/.env": "TOKEN=1\n"}),
    case("out-run-gained-hidden-folder", f"{SIM} -o {{d}}/run", ".ipynb_checkpoints", t__csv=TRACE, **{"run/summary.json": "{}", "run/.ipynb_checkpoints/a.ipynb": "{}"}),
    case("out-run-gained-hidden-file", f"{SIM} -o {{d}}/run", ".DS_Store", t__csv=TRACE, **{"run/summary.json": "{}", "run/.DS_Store": "x"}),
    case("out-is-working-folder", f"{SIM} -o .", "working folder", t__csv=TRACE, **{".ssh/id_ed25519": "key"}),
    case("out-is-parent-of-working-folder", f"{SIM} -o ..", "working folder", t__csv=TRACE),
    case("out-is-working-folder-absolute", f"{SIM} -o {{d}}", "working folder", t__csv=TRACE),
    case("out-is-root", f"{SIM} -o /", "the root or home folder", t__csv=TRACE),
    case("plan-out-dot-files", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=2s -H h100-sxm --tp 1 -p chunked -o {d}/p", "not from a run (.env)", t__csv=TRACE, **{"p/.env": "x"}),
    case("plan-out-working-folder", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=2s -H h100-sxm --tp 1 -p chunked -o .", "working folder", t__csv=TRACE),
    case("csv-is-a-folder", f"{SIM} --csv {{d}}/r.csv -o {{d}}/out", "--csv", t__csv=TRACE, **{"r.csv/keep": "x"}),
    case("csv-folder-missing", f"{SIM} --csv {{d}}/no/r.csv", "--csv", t__csv=TRACE),
    case("csv-is-a-folder-with-earlier-run", f"{SIM} --csv {{d}}/r.csv -o {{d}}/run", "--csv", t__csv=TRACE, **{"r.csv/keep": "x", "run/summary.json": "{}"}),
    case("sweep-results-is-a-folder", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/sw --no-plots", "results.parquet is a folder", t__csv=TRACE, **{"sw/results.parquet/keep": "x"}),
    case("sweep-parts-is-a-file", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/sw --no-plots", "parts is a file", t__csv=TRACE, **{"sw/parts": "x"}),
    case("sweep-lock-is-a-folder", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/sw --no-plots", ".sweep.lock is a folder", t__csv=TRACE, **{"sw/.sweep.lock/keep": "x"}),
    # ---- knobs without effect ----
    case("knob-kv-transfer-without-disagg", f"{SIM} --kv-transfer-gb-s 5", "--kv-transfer-gb-s: has no effect", t__csv=TRACE),
    case("knob-kv-latency-without-disagg", f"{SIM} --kv-transfer-latency-us 5", "--kv-transfer-latency-us: has no effect", t__csv=TRACE),
    case("knob-prefill-hardware-without-disagg", f"{SIM} --prefill-hardware h200", "--prefill-hardware", t__csv=TRACE),
    case("knob-decode-tp-without-disagg", f"{SIM} --decode-tp 2", "--decode-hardware/--decode-tp", t__csv=TRACE),
    case("knob-spec-acceptance-without-tokens", f"{SIM} --spec-acceptance 0.5", "--spec-acceptance: has no effect", t__csv=TRACE),
    case("knob-spec-method-without-tokens", f"{SIM} --spec-method draft --spec-draft-model llama-3-8b", "has no effect without --spec-tokens", t__csv=TRACE),
    case("knob-spec-draft-cost-without-tokens", f"{SIM} --spec-draft-cost 0.1", "--spec-draft-cost: has no effect", t__csv=TRACE),
    case("knob-config-kv-transfer-without-disagg", f"{SIM} -c {{d}}/c.yaml", "--kv-transfer-gb-s: has no effect", t__csv=TRACE, c__yaml="kv_transfer_gb_s: 5\n"),
    case("knob-cpu-cache-without-radix", f"{SIM} --cpu-cache-gib 4", "radix", t__csv=TRACE),
    case("knob-only-prefill-replicas", f"{SIM} --prefill-replicas 1", "--prefill-replicas, --decode-replicas", t__csv=TRACE),
    case("disagg-group-pp", f"{SIM} -m qwen3-30b-a3b -c {{d}}/c.yaml", "pipeline stages with disaggregated", t__csv=TRACE, c__yaml="prefill_replicas: 1\ndecode_replicas: 1\ndecode: {tp: 2, pp: 2}\n"),
    case("disagg-group-ep-not-dividing", f"{SIM} -m qwen3-30b-a3b --prefill-replicas 1 --decode-replicas 1 --decode-dp 3 --decode-enable-expert-parallel", "--ep", t__csv=TRACE),
    case("disagg-group-ep-with-spec", f"{SIM} -m qwen3-30b-a3b --prefill-replicas 1 --decode-replicas 1 --decode-dp 2 --decode-enable-expert-parallel --spec-tokens 2", "speculative decoding", t__csv=TRACE),
    case("disagg-group-bad-a2a", f"{SIM} -m qwen3-30b-a3b --prefill-replicas 1 --decode-replicas 1 --decode-moe-a2a-backend nvshmem", "--decode-moe-a2a-backend", t__csv=TRACE),
    # ---- one budget for what a run allocates; derived times ----
    case("budget-cpu-cache-1e308", f"{SIM} --policy radix --cpu-cache-gib 1e308", "--cpu-cache-gib", t__csv=TRACE),
    case("budget-cpu-cache-nan", f"{SIM} --policy radix --cpu-cache-gib nan", "--cpu-cache-gib", t__csv=TRACE),
    case("budget-swap-space-1e308", f"{SIM} --swap-space 1e308 --preemption-mode swap", "--swap-space", t__csv=TRACE),
    case("budget-prefill-replicas-1e9", f"{SIM} --prefill-replicas 1000000000 --decode-replicas 1", "--prefill-replicas", t__csv=TRACE),
    case("budget-decode-replicas-1e9", f"{SIM} --prefill-replicas 1 --decode-replicas 1000000000", "--decode-replicas", t__csv=TRACE),
    case("budget-p-plus-d-replicas", f"{SIM} --prefill-replicas 15000 --decode-replicas 15000", "prefill_replicas + decode_replicas", t__csv=TRACE),
    case("budget-replicas-1e9", f"{SIM} --replicas 1000000000", "--replicas", t__csv=TRACE),
    case("budget-replicas-50000", f"{SIM} --replicas 50000", "--replicas: Input should be less than or equal to 20000", t__csv=TRACE),
    case("budget-replica-hardware-50000", f"{SIM} -c {{d}}/c.yaml", "replica_hardware", t__csv=TRACE, c__yaml="replica_hardware: [" + ", ".join(["h100-sxm"] * 50000) + "]\n"),
    case("budget-uncertainty-1e9", f"{SIM} --uncertainty 1000000000", "--uncertainty", t__csv=TRACE),
    case("budget-uncertainty-1", f"{SIM} --uncertainty 1", "--uncertainty", t__csv=TRACE),
    case("budget-uncertainty-x-requests", "simulate --bench requests=100000,isl=10,osl=10 --uncertainty 5000", "draws x 100,000 requests"),
    case("budget-batching-window-1e308", f"{SIM} --policy static --batching-window-s 1e308", "--batching-window-s", t__csv=TRACE),
    case("budget-kv-latency-1e308", f"{SIM} --prefill-replicas 1 --decode-replicas 1 --kv-transfer-latency-us 1e308", "--kv-transfer-latency-us", t__csv=TRACE),
    case("budget-spec-draft-cost-huge", f"{SIM} --spec-tokens 2 --spec-draft-cost 1e300", "--spec-draft-cost", t__csv=TRACE),
    case("budget-spec-tokens-huge", f"{SIM} --spec-tokens 1000000000", "--spec-tokens", t__csv=TRACE),
    case("derived-rate-scale-tiny", f"{SIM} --rate-scale 1e-308", "--rate-scale: a factor of 1e-308", t__csv=TRACE),
    case("derived-kv-bandwidth-tiny", f"{SIM} --prefill-replicas 1 --decode-replicas 1 --kv-transfer-gb-s 1e-300", "the run: its simulated clock reached", t__csv=TRACE),
    case("derived-kv-bandwidth-tiny-out", f"{SIM} --prefill-replicas 1 --decode-replicas 1 --kv-transfer-gb-s 1e-300 -o {{d}}/out", "past 1e+10 s", t__csv=TRACE),
    case("derived-rate-scale-inf", f"{SIM} --rate-scale inf", "--rate-scale", t__csv=TRACE),
    case("derived-rate-scale-negative", f"{SIM} --rate-scale -2", "--rate-scale", t__csv=TRACE),
    case("derived-qps-tiny", f"{SIM} --qps 1e-308", "--qps", t__csv=TRACE),
    case("derived-qps-negative", f"{SIM} --qps -1", "--qps", t__csv=TRACE),
    case("derived-qps-nan", f"{SIM} --qps nan", "--qps", t__csv=TRACE),
    case("derived-trace-span-1e300", "workload describe {d}/t.csv", "spans at most", t__csv="arrival_s,prompt_tokens,output_tokens\n0,10,5\n1e300,10,5\n"),
    case("negative-arrival-csv", "workload describe {d}/t.csv", "must be >= 0 s; row 1", t__csv="arrival_s,prompt_tokens,output_tokens\n-5,10,5\n1,10,5\n"),
    case("negative-arrival-jsonl", "workload describe {d}/t.jsonl", "must be >= 0 s", t__jsonl='{"timestamp": -5, "input_length": 10, "output_length": 5}\n{"timestamp": 1, "input_length": 10, "output_length": 5}\n'),
    case("negative-arrival-in-simulate", "simulate -t {d}/t.csv -o {d}/out", "must be >= 0 s", t__csv="arrival_s,prompt_tokens,output_tokens\n-5,10,5\n1,10,5\n"),
    # ---- workload spec products (prompt after prefix assembly, hash ids, samples, turns) ----
    case("spec-system-prompt-product", "workload describe {d}/s.yaml", "shared prefix blocks", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "n_requests: 100000") + "  prefix: {system_prompts: {n_templates: 100000, tokens: {kind: fixed, value: 10000000}}}\n")),
    case("spec-few-shot-prompt-too-long", "workload describe {d}/s.yaml", "a shared prefix (system prompt + few-shot instruction + shots) has", s__yaml=spec(GOOD_SYNTH + "  prefix: {few_shot: {n_templates: 1, n_shots: 10000000, shot_tokens: {kind: fixed, value: 10000000}}}\n")),
    case("spec-few-shot-draws", "workload describe {d}/s.yaml", "n_templates x n_shots", s__yaml=spec(GOOD_SYNTH + "  prefix: {few_shot: {n_templates: 10000000, n_shots: 10000000, shot_tokens: {kind: fixed, value: 1}}}\n")),
    case("spec-prompt-after-prefix-too-long", "workload describe {d}/s.yaml", "after its shared prefix and history", s__yaml=spec(GOOD_SYNTH.replace("value: 50}", "value: 9000000}") + "  prefix: {system_prompts: {n_templates: 1, tokens: {kind: fixed, value: 5000000}}}\n")),
    case("spec-history-too-long", "workload describe {d}/s.yaml", "after its shared prefix and history", s__yaml=spec(GOOD_SYNTH.replace("value: 50}", "value: 4000000}") + "  prefix: {multi_turn: {turns: {kind: fixed, value: 5}, think_time_s: 1}}\n")),
    case("spec-hash-ids-product", "workload describe {d}/s.yaml", "prefix hash ids", s__yaml=spec(GOOD_SYNTH.replace("value: 50}", "value: 10000000}").replace("n_requests: 4", "n_requests: 1000") + "  hash_block_tokens: 16\n")),
    case("spec-samples-product", "workload describe {d}/s.yaml", "requests x synthetic.n_samples", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "n_requests: 100") + "  n_samples: {kind: fixed, value: 10000000}\n")),
    case("spec-turns-product", "workload describe {d}/s.yaml", "sessions x prefix.multi_turn.turns", s__yaml=spec(GOOD_SYNTH.replace("n_requests: 4", "duration_s: 10") + "  prefix: {multi_turn: {turns: {kind: fixed, value: 10000000}, think_time_s: 1}}\n")),
    case("spec-product-in-sample", "workload sample {d}/s.yaml --out {d}/o.jsonl", "n_templates x n_shots", s__yaml=spec(GOOD_SYNTH + "  prefix: {few_shot: {n_templates: 10000000, n_shots: 10000000, shot_tokens: {kind: fixed, value: 1}}}\n")),
    case("spec-product-in-simulate", "simulate -t {d}/s.yaml -o {d}/out", "n_templates x n_shots", s__yaml=spec(GOOD_SYNTH + "  prefix: {few_shot: {n_templates: 10000000, n_shots: 10000000, shot_tokens: {kind: fixed, value: 1}}}\n")),
    # ---- disagg, plan: their own flags, their own budget ----
    case("disagg-ratio-1e6", "disagg -t {d}/t.csv --ratios 1000000:1", "--ratios: 1000000:1: asks for 1,000,001 replicas", t__csv=TRACE),
    case("disagg-ratio-zero", "disagg -t {d}/t.csv --ratios 0:1", "--ratios", t__csv=TRACE),
    case("disagg-ratio-text", "disagg -t {d}/t.csv --ratios fast", "--ratios", t__csv=TRACE),
    case("disagg-load-nan", "disagg -t {d}/t.csv --load nan", "--load: must be a finite number > 0", t__csv=TRACE),
    case("disagg-load-inf", "disagg -t {d}/t.csv --load inf", "--load", t__csv=TRACE),
    case("disagg-load-tiny", "disagg -t {d}/t.csv --load 1e-300", "--load", t__csv=TRACE),
    case("disagg-max-requests-0", "disagg -t {d}/t.csv --max-requests 0", "--max-requests", t__csv=TRACE),
    case("disagg-ttft-slo-nan", "disagg -t {d}/t.csv --ttft-slo nan", "--ttft-slo", t__csv=TRACE),
    case("disagg-tpot-slo-negative", "disagg -t {d}/t.csv --tpot-slo -1", "--tpot-slo", t__csv=TRACE),
    case("disagg-policy-static", "disagg -t {d}/t.csv --policy static", "policy", t__csv=TRACE),
    case("plan-disagg-ratio-1e6", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --disagg 1000000:1", "--disagg: 1000000:1", t__csv=TRACE),
    case("plan-uncertainty-1e9", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --uncertainty 1000000000", "--uncertainty", t__csv=TRACE),
    case("plan-uncertainty-1", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --uncertainty 1", "--uncertainty", t__csv=TRACE),
    case("plan-uncertainty-x-requests", "plan -w splitwise_conv --target-qps 1 --slo ttft_p99=1s --uncertainty 10000", "10,000 draws x 19,366 requests"),
    case("plan-max-verify-runs-0", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --max-verify-runs 0", "--max-verify-runs", t__csv=TRACE),
    case("plan-target-negative", "plan -w {d}/t.csv --target-qps -1 --slo ttft_p99=1s", "--target-qps", t__csv=TRACE),
    case("plan-goodput-2", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --goodput 2", "--goodput", t__csv=TRACE),
    case("plan-unknown-hardware", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s -H h900", "h900", t__csv=TRACE),
    case("plan-tp-0", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --tp 0", "--tp", t__csv=TRACE),
    case("plan-unknown-policy", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s -p fifo", "fifo", t__csv=TRACE),
    case("plan-search-bad", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s --search max_num_seqs", "--search", t__csv=TRACE),
    case("plan-workload-negative-arrival", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s", "must be >= 0 s", t__csv="arrival_s,prompt_tokens,output_tokens\n-5,10,5\n1,10,5\n"),
    # ---- other flags of every command ----
    case("simulate-percentiles-text", f"{SIM} --percentiles 50,abc", "--percentiles", t__csv=TRACE),
    case("simulate-percentiles-100", f"{SIM} --percentiles 100", "--percentiles", t__csv=TRACE),
    case("simulate-goodput-2", f"{SIM} --slo ttft_p99=1s --goodput 2", "--goodput", t__csv=TRACE),
    case("simulate-slo-nan", f"{SIM} --slo ttft_p99=nan", "--slo", t__csv=TRACE),
    case("simulate-slo-unknown-key", f"{SIM} --slo speed_p99=1", "--slo", t__csv=TRACE),
    case("simulate-workers-0", f"{SIM} --workers 0", "--workers", t__csv=TRACE),
    case("simulate-backend-unknown", f"{SIM} --backend slurm", "--backend", t__csv=TRACE),
    case("simulate-spec-acceptance-text", f"{SIM} --spec-tokens 2 --spec-acceptance high", "--spec-acceptance", t__csv=TRACE),
    case("simulate-spec-acceptance-over-1", f"{SIM} --spec-tokens 2 --spec-acceptance 2", "spec_acceptance", t__csv=TRACE),
    case("simulate-spec-acceptance-count", f"{SIM} --spec-tokens 2 --spec-acceptance 0.5,0.5,0.5", "spec_acceptance", t__csv=TRACE),
    case("simulate-spec-static", f"{SIM} --spec-tokens 2 --policy static", "spec_tokens > 0) needs policy continuous", t__csv=TRACE),
    case("simulate-spec-draft-without-model", f"{SIM} --spec-tokens 2 --spec-method draft", "spec_draft_model", t__csv=TRACE),
    case("simulate-unknown-router", f"{SIM} --router magic", "--router", t__csv=TRACE),
    case("simulate-unknown-engine", f"{SIM} --engine vllm2", "vllm2", t__csv=TRACE),
    case("simulate-allreduce-unknown", f"{SIM} --engine vllm --allreduce ring", "--allreduce", t__csv=TRACE),
    case("simulate-eager-without-engine", f"{SIM} --enforce-eager", "--engine", t__csv=TRACE),
    case("simulate-scheduler-steps-0", f"{SIM} --engine vllm --num-scheduler-steps 0", "--num-scheduler-steps", t__csv=TRACE),
    case("simulate-replica-hardware-unknown", f"{SIM} --replica-hardware h100-sxm,h900", "h900", t__csv=TRACE),
    case("simulate-max-model-len-0", f"{SIM} --max-model-len 0", "--max-model-len", t__csv=TRACE),
    case("simulate-gpu-blocks-0", f"{SIM} --num-gpu-blocks-override 0", "--num-gpu-blocks-override", t__csv=TRACE),
    case("simulate-chunk-size-without-chunked", f"{SIM} --chunk-size 64", "chunk_size", t__csv=TRACE),
    case("simulate-radix-ordering-without-radix", f"{SIM} --radix-ordering lpm", "radix", t__csv=TRACE),
    case("simulate-qps-and-rate-scale", f"{SIM} --qps 2 --rate-scale 2", "--qps", t__csv=TRACE),
    case("simulate-weight-dtype-unknown", f"{SIM} --weight-dtype fp2", "fp2", t__csv=TRACE),
    case("sweep-grid-qps-nan", "sweep -g qps=nan -t {d}/t.csv -o {d}/out", "qps", t__csv=TRACE),
    case("sweep-grid-seed-negative", "sweep -g seed=-1 -t {d}/t.csv -o {d}/out", "seed", t__csv=TRACE),
    case("sweep-grid-repeated-value", "sweep -g max_num_seqs=8,8 -t {d}/t.csv -o {d}/out", "listed twice", t__csv=TRACE),
    case("sweep-grid-unknown-key", "sweep -g speed=1,2 -t {d}/t.csv -o {d}/out", "speed", t__csv=TRACE),
    case("sweep-base-unknown-key", "sweep --base {d}/b.yaml -g max_num_seqs=8 -t {d}/t.csv -o {d}/out", "unknown", t__csv=TRACE, b__yaml="speed: 3\n"),
    case("sweep-workers-0", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --workers 0", "--workers", t__csv=TRACE),
    case("sweep-backend-unknown", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --backend slurm", "--backend", t__csv=TRACE),
    case("memory-tp-0", "memory --tp 0", "--tp"),
    case("memory-utilization-nan", "memory --gpu-memory-utilization nan", "--gpu-memory-utilization"),
    case("roofline-prefill-tokens-0", "roofline --prefill-tokens 0", "--prefill-tokens"),
    case("roofline-context-negative", "roofline --context -1", "--context"),
    case("roofline-batch-huge", "roofline --batch 100000000000", "--batch"),
    case("calibrate-budget-nan", "calibrate run --device cpu --quick --time-budget-s nan --out {d}/p.yaml", "--time-budget-s"),
    case("calibrate-run-out-not-yaml", "calibrate run --device cpu --quick --out {d}/p.txt", "--out"),
    case("calibrate-run-dtype-fp4", "calibrate run --device cpu --quick --dtype fp4 --out {d}/p.yaml", "--dtype"),
    case("calibrate-fit-nan-time", "calibrate report h100-sxm {d}/m.csv", "time_s", m__csv=MEASUREMENT_HEADER + GEMM_ROW.replace("0.0001,", "nan,")),
    case("calibrate-fit-unknown-base", "calibrate fit {d}/m.csv --base h900 --out {d}/p.yaml", "h900", m__csv=MEASUREMENT_HEADER + GEMM_ROW),
    case("calibrate-report-plot-not-png", "calibrate report h100-sxm {d}/m.csv --plot {d}/x.jpg", "--plot", m__csv=MEASUREMENT_HEADER + GEMM_ROW),
    case("calibrate-engine-objective", "calibrate engine {d}/v.csv -o {d}/e.yaml --objective max", "objective", v__csv=vrow()),
    case("calibrate-engine-split", "calibrate engine {d}/v.csv -o {d}/e.yaml --split some", "--split", v__csv=vrow()),
    case("calibrate-engine-no-split-fit-rows", "calibrate engine {d}/v.csv -o {d}/e.yaml --split fit", "no case", v__csv=vrow(split="score")),
    case("validate-engine-missing-file", "validate --engine {d}/none.yaml", "none.yaml"),
    case("validate-file-is-folder", "validate {d}/sub", "sub", **{"sub/keep": "x"}),
    case("workload-sample-out-parent-missing", "workload sample {d}/s.yaml --out {d}/no/o.jsonl", "does not exist", s__yaml=spec(GOOD_SYNTH)),
    case("workload-describe-time-unit-bad", "workload describe {d}/t.csv --format generic --time-unit fortnights", "--time-unit", t__csv=TRACE),
    case("workload-schema-extra-argument", "workload schema extra", "extra"),
    case("engines-unknown-option", "engines --jsn", "--jsn"),
    # ---- error lines: control characters in file names are escaped, never printed raw ----
    case("name-with-escape-sequence", ["simulate", "-t", "{d}/a\x1b[31mred.csv"], "\\x1b[31mred.csv"),
    case("name-with-newline", ["workload", "describe", "{d}/a\nb.csv"], "a\\nb.csv"),
    case("name-with-bidi-override", ["memory", "-m", "{d}/m\u202eyaml.txt"], "\\u202e"),
    case("name-with-escape-in-csv", ["simulate", "-t", "{d}/t.csv", "--csv", "{d}/\x1b]0;x\x07/r.csv"], "\\x1b]0;x\\x07 does not exist", t__csv=TRACE),
]


# a short autoscaled day (two chunks of 10 s, up to two replicas): the base of the day-spec cases
DAY = """workload:
  kind: day
  duration_s: 20
  seed: 0
  chunk_s: 10
  tenants:
    - name: chat
      rate: {base: {kind: constant, rate_rps: 2}}
      lengths: {prompt: {kind: fixed, value: 100}, output: {kind: fixed, value: 10}}
engine: {model: llama-3.1-8b, hardware: h100-sxm, engine: vllm}
fleet:
  router: round_robin
  autoscaler:
    policy: {kind: target, metric: queue_length, target: 4}
    interval_s: 10
    min_replicas: 1
    max_replicas: 2
slo: {ttft_s: 2.0, tpot_s: 0.1}
"""
