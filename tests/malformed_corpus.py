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


def case(case_id: str, argv: str, expected: str, **files) -> Case:
    return Case(case_id, argv.split(), expected, {name.replace("__", "."): text for name, text in files.items()})


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


def model(**changes) -> str:
    return with_changes(MODEL, **changes)


def profile(**changes) -> str:
    return with_changes(PROFILE, **changes)


def hf(**changes) -> str:
    return json.dumps({**HF, **changes})


def spec(synthetic_yaml: str) -> str:
    return "synthetic:\n" + synthetic_yaml


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
    # ---- parallel layouts (sim/layout.py, docs/parallelism.md) ----
    case("flag-simulate-pp-0", f"{SIM} --pp 0", "--pp", t__csv=TRACE),
    case("flag-simulate-pp-over-layers", f"{SIM} --pp 64", "layers", t__csv=TRACE),
    case("flag-simulate-ep-on-dense", f"{SIM} --ep 2", "no experts to shard", t__csv=TRACE),
    case("flag-simulate-dp-attention-on-dense", f"{SIM} --tp 2 --dp 2 --enable-dp-attention", "no experts to shard", t__csv=TRACE),
    case("flag-simulate-nodes-too-few", f"{SIM} --replicas 9 --nodes 1", "need 2 nodes", t__csv=TRACE),
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
    case("flag-simulate-config-is-folder", f"{SIM} -c {{d}}", "cannot read", t__csv=TRACE),
    case("flag-simulate-trace-is-folder", "simulate -t {d}", "not a file"),
    case("flag-plan-workers-0", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1 --workers 0", "--workers", t__csv=TRACE),
    case("flag-plan-top-negative", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1 --top -1", "--top", t__csv=TRACE),
    case("flag-plan-target-nan", "plan -w {d}/t.csv --target-qps nan --slo ttft_p99=1", "--target-qps", t__csv=TRACE),
    case("flag-plan-seed-negative", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1 --seed -1", "--seed", t__csv=TRACE),
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
    case("plan-out-is-a-file", "plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=2 -H h100-sxm --tp 1 -p chunked -o {d}/t.csv", "not a directory", t__csv=TRACE),
    case("sweep-out-is-a-file", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/t.csv", "not a directory", t__csv=TRACE),
    case("sweep-fails-at-first-point", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --no-plots", "10,000,000", t__csv="arrival_s,prompt_tokens,output_tokens\n0,1e30,5\n"),
    # ---- documented successes (edge cases that are valid) ----
    case("ok-bom-azure-csv", "workload describe {d}/t.csv", OK, t__csv="\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:50.99,396,109\n"),
    case("ok-block-size-not-power-of-two", f"{SIM} --block-size 24 -o {{d}}/out", OK, t__csv=TRACE),
    case("ok-memory-block-size-24", "memory --block-size 24", OK),
    case("ok-one-output-token", "workload describe {d}/t.csv", OK, t__csv="arrival_s,prompt_tokens,output_tokens\n0,10,1\n"),
    case("ok-hf-without-kv-heads-is-mha", f"{MEM} -m {{d}}/config.json", OK, config__json=json.dumps({k: v for k, v in HF.items() if k != "num_key_value_heads"})),
]
