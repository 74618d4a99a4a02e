"""Hostile inputs as a new user tries them (issue 37): every numeric flag of every command given
huge, NaN, infinite, negative, zero and tiny values, plus unknown names and conflicting flags.

`NUMERIC_CASES` are generated from the CLI itself (typer's parameters): a numeric flag added to a
command is tried without a line here. Each expects one error line naming the flag (exit 2), except
the documented successes in `VALID`, each with why it is a correct run. `ISSUE_CASES` are written
out, one per line. `ALL_CASES` = the malformed corpus + these; tests/corpus_runner.py runs them.
"""

# ruff: noqa: E501 (one case per line, however long)
from __future__ import annotations

import json

import typer

from tests.destination_corpus import DESTINATION_CASES
from tests.malformed_corpus import (
    CASES as MALFORMED_CASES,
)
from tests.malformed_corpus import (
    DAY,
    GOOD_SYNTH,
    OK,
    TRACE,
    Case,
    bench_json,
    case,
    spec,
    vrow,
)

TRACE_30 = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.5},100,10\n" for i in range(30))
LENGTHS = "num_prefill_tokens,num_decode_tokens\n10,5\n"
# command -> (argv that runs correctly on the case folder's files, those files)
BASES = {
    "memory": ("memory", {}),
    "roofline": ("roofline", {}),
    "simulate": ("simulate -t {d}/t.csv --max-requests 3", {"t.csv": TRACE}),
    "plan": ("plan -w {d}/t.csv --target-qps 1 --slo ttft_p99=1s -H h100-sxm --tp 1 -p chunked", {"t.csv": TRACE_30}),
    "sweep": ("sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --no-plots", {"t.csv": TRACE}),
    "validate": ("validate {d}/v.csv", {"v.csv": vrow()}),
    "disagg": ("disagg -t {d}/t.csv --max-requests 3", {"t.csv": TRACE}),
    "workload describe": ("workload describe {d}/t.csv", {"t.csv": LENGTHS}),
    "workload sample": ("workload sample {d}/s.yaml --out {d}/o.jsonl", {"s.yaml": spec(GOOD_SYNTH)}),
    "calibrate run": ("calibrate run --device cpu --quick --out {d}/p.yaml", {}),
    "calibrate engine": ("calibrate engine {d}/b.json -o {d}/e.yaml -m llama-3-8b -H h100-sxm", {"b.json": bench_json()}),
    "day run": ("day run {d}/day.yaml --out {d}/out --no-plot", {"day.yaml": DAY}),
    "day plan": ("day plan {d}/day.yaml", {"day.yaml": DAY}),
}
FLOAT_VALUES = ("1e308", "nan", "inf", "-inf", "-1", "0", "1e-308")
INT_VALUES = (str(10**30), "-1", "0", "1000000000")
# (command, flag, value) that are correct runs, and why
VALID = {
    **{("memory", "--ep-num-redundant-experts", "0"): "no redundant experts (vLLM's default)",
       ("roofline", "--context", "0"): "a decode step over an empty context",
       ("simulate", "--ep-num-redundant-experts", "0"): "no redundant experts (vLLM's default)",
       ("simulate", "--swap-space", "0"): "no host swap space (vLLM accepts 0)",
       ("simulate", "--swap-space", "1e-308"): "a swap space too small for one block: recompute instead",
       ("simulate", "--batching-window-s", "0"): "no wait for a static batch to fill (the default)",
       ("simulate", "--seed", "0"): "seed 0", ("simulate", "--seed", "1000000000"): "a seed below 2**63",
       ("simulate", "--spec-tokens", "0"): "speculative decoding off (the default)",
       ("simulate", "--cpu-cache-gib", "0"): "no host tier (the default)",
       ("simulate", "--qps", "inf"): "vLLM's --request-rate inf: every request at t = 0",
       ("plan", "--min-finished", "1e-308"): "a share in (0, 1]",
       ("plan", "--cpu-cache-gib", "0"): "no host tier (the default)",
       ("plan", "--seed", "0"): "seed 0", ("plan", "--seed", "1000000000"): "a seed below 2**63",
       ("disagg", "--ttft-slo", "1e-308"): "an SLO nothing meets: every layout's goodput is 0",
       ("disagg", "--tpot-slo", "1e-308"): "an SLO nothing meets: every layout's goodput is 0",
       ("disagg", "--prefill-ep-num-redundant-experts", "0"): "no redundant experts",
       ("disagg", "--decode-ep-num-redundant-experts", "0"): "no redundant experts",
       ("workload describe", "--lengths-rate-qps", "1e-308"): "one request: no span to exceed the clock",
       ("workload sample", "--seed", "0"): "seed 0", ("workload sample", "--seed", "1000000000"): "a seed below 2**63",
       ("day run", "--seed", "0"): "seed 0", ("day run", "--seed", "1000000000"): "a seed below 2**63"},
    # caps ("at most N"): a huge cap is no cap, the run is the uncapped one
    **{(command, flag, value): "an upper cap: a huge one caps nothing" for command, flag in (
        ("simulate", "--workers"), ("simulate", "--num-gpu-blocks-override"), ("plan", "--max-requests"),
        ("plan", "--max-verify-runs"), ("plan", "--max-verified"), ("plan", "--max-replica-gpus"),
        ("plan", "--screen-keep"), ("plan", "--workers"), ("plan", "--top"), ("sweep", "--workers"),
        ("validate", "--max-sim-requests"), ("calibrate engine", "--max-sim-requests"), ("sweep", "--max-points"),
        ("plan", "--max-candidates"))
       for value in (str(10**30), "1000000000")},
}
# values left out: a correct run that takes minutes (the whole CPU calibration)
SKIPPED = {("calibrate run", "--time-budget-s", "1e308")}
# where the one line names the knob by another spelling than the flag itself
NAMED_AS = {("simulate", flag): "--prefill-" for flag in ("--prefill-tp", "--prefill-dp", "--prefill-ep",
                                                         "--prefill-ep-num-redundant-experts")}
NAMED_AS |= {("simulate", flag): "--decode-" for flag in ("--decode-tp", "--decode-dp", "--decode-ep",
                                                         "--decode-ep-num-redundant-experts")}


def _numeric_flags(command) -> list[tuple[str, str]]:
    """(flag, 'float' | 'int') of each numeric option of a click command, in declaration order."""
    flags = []
    for param in command.params:
        kind = str(param.bare_type())
        if "bool" not in kind and ("float" in kind or "int" in kind):
            flags.append((param.opts[0], "float" if "float" in kind else "int"))
    return flags


def numeric_cases() -> list[Case]:
    from sim.cli import app

    root = typer.main.get_command(app)
    cases = []
    for path, (base, files) in BASES.items():
        command = root
        for word in path.split():
            command = command.commands[word]
        for flag, kind in _numeric_flags(command):
            for value in FLOAT_VALUES if kind == "float" else INT_VALUES:
                if (path, flag, value) in SKIPPED:
                    continue
                expected = OK if (path, flag, value) in VALID else NAMED_AS.get((path, flag), flag)
                label = "huge" if len(value) > 12 else value
                cases.append(Case(f"num-{path.replace(' ', '-')}{flag}={label}", [*base.split(), flag, value],
                                  expected, dict(files)))
    return cases


SIM30 = "simulate -t {d}/t.csv"
CE_CSV = "calibrate engine {d}/v.csv -o {d}/e.yaml"
PLAN = "plan -w {d}/t.csv --slo ttft_p99=1s -H h100-sxm --tp 1 -p chunked"
# a `simulate --out` bench_serve.json (vllm bench serve --save-result's shape): 24 requests of 100 / 10 tokens
BENCH_SERVE = json.dumps({"backend": "infersim", "num_prompts": 24, "completed": 24, "failed": 0, "total_input_tokens": 2400,
                          "total_output_tokens": 240, "output_throughput": 800.0, "request_rate": "inf", "max_concurrency": None,
                          "input_lens": [100] * 24, "output_lens": [10] * 24, "ttfts": [0.02] * 24,
                          "latencies": [0.1] * 24, "start_times": [0.0] * 24, "errors": [""] * 24,
                          "infersim_simulated": True, "infersim_summary": "summary.json", "infersim_version": "0.1.0"})
CLOSED_LOOP_HUGE_THINK = "trace: t.csv\narrival: {kind: closed_loop, concurrency: 2, think_time_s: 1e308}\n"

ISSUE_CASES = [
    # ---- issue 37 as filed: tracebacks, silent acceptances, misnamed lines ----
    case("issue-qps-1e308", f"{SIM30} --qps 1e308", "--qps: must be a rate in (0, 1e+09]", t__csv=TRACE_30),
    case("issue-rate-scale-1e308", f"{SIM30} --rate-scale 1e308", "--rate-scale: a factor of 1e+308", t__csv=TRACE_30),
    case("issue-trace-qps-1e308", f"{SIM30} --trace-qps 1e308", "--trace-qps", t__csv=TRACE_30),
    case("issue-qps-1e10", f"{SIM30} --qps 1e10", "--qps", t__csv=TRACE_30),
    case("issue-rate-scale-1e12", f"{SIM30} --rate-scale 1e12", "--rate-scale", t__csv=TRACE_30),
    case("issue-sweep-qps-1e308", "sweep -g qps=1e308 -t {d}/t.csv -o {d}/out --no-plots", "qps", t__csv=TRACE_30),
    case("issue-validate-split-selects-nothing", "validate {d}/v.csv --split fit", "--split: fit: no case", v__csv=vrow(split="score")),
    case("issue-calibrate-engine-unknown-engine", CE_CSV, "engine: unknown engine 'nope'", v__csv=vrow(engine="nope")),
    case("issue-calibrate-engine-other-family", CE_CSV, "engine: measured on sglang", v__csv=vrow(engine="sglang")),
    case("issue-bench-with-default-trace", "simulate --bench requests=4,isl=10,osl=5 -t splitwise_conv", "--bench: replaces the workload"),
    case("issue-bench-with-qps", "simulate --bench requests=4,isl=10,osl=5 --qps 2", "--bench"),
    case("issue-bench-with-num-prompts", "simulate --bench requests=4,isl=10,osl=5 --num-prompts 3", "--bench"),
    case("issue-think-time-1e308-closed-loop", "simulate -t {d}/s.yaml", "think_time_s", s__yaml=CLOSED_LOOP_HUGE_THINK, t__csv=TRACE),
    case("issue-think-time-1e308-multi-turn", "simulate -t {d}/s.yaml", "think_time_s", s__yaml=spec(GOOD_SYNTH + "  prefix: {multi_turn: {turns: {kind: fixed, value: 2}, think_time_s: 1e308}}\n")),
    case("issue-think-cv-1e308", "simulate -t {d}/s.yaml", "think_time_cv", s__yaml=CLOSED_LOOP_HUGE_THINK.replace("think_time_s: 1e308", "think_time_cv: 1e308"), t__csv=TRACE),
    case("issue-calibrate-engine-own-bench-serve", "calibrate engine {d}/bench_serve.json -o {d}/e.yaml -m llama-3-8b -H h100-sxm", OK, bench_serve__json=BENCH_SERVE),
    case("issue-plan-target-1e308", f"{PLAN} --target-qps 1e308", "--target-qps: must be a rate", t__csv=TRACE_30),
    case("issue-plan-target-needs-too-many-replicas", f"{PLAN} --target-qps 1e8", "--target-qps: 1e+08 req/s needs", t__csv=TRACE_30),
    case("issue-disagg-load-1e308", "disagg -t {d}/t.csv --load 1e308", "--load: 1e+308 x", t__csv=TRACE),
    case("issue-day-plan-probe-tiny", "day plan {d}/day.yaml --probe-s 1e-308", "--probe-s", day__yaml=DAY),
    case("issue-day-interval-tiny", "day run {d}/day.yaml --out {d}/out --no-plot", "interval_s", day__yaml=DAY.replace("interval_s: 10", "interval_s: 1e-308")),
    case("issue-day-rate-1e308", "day run {d}/day.yaml --out {d}/out --no-plot", "rate_rps", day__yaml=DAY.replace("rate_rps: 2", "rate_rps: 1e308")),
    case("issue-day-seed-huge", f"day run {{d}}/day.yaml --out {{d}}/out --no-plot --seed {10**30}", "--seed", day__yaml=DAY),
    case("issue-sweep-max-requests-huge", f"sweep -g max_num_seqs=8 -t {{d}}/t.csv -o {{d}}/out --no-plots --max-requests {10**30}", "--max-requests", t__csv=TRACE),
    case("issue-calibrate-run-budget-tiny", "calibrate run --device cpu --quick --time-budget-s 1e-308 --out {d}/p.yaml", "--time-budget-s"),
    # ---- issue 35 item 7 ----
    case("issue45-plan-lmdeploy-emit-k8s", f"{PLAN} --target-qps 1 --engine lmdeploy -o {{d}}/out --emit k8s",  # SGLang: written since issue 45
         "--emit: k8s: writes manifests for vLLM, SGLang and TensorRT-LLM", t__csv=TRACE_30),
    case("issue35-plan-tp-past-node", "plan -w {d}/t.csv --slo ttft_p99=1s -H h100-sxm --tp 16 --target-qps 1 -m llama-3.1-405b", "span nodes with pipeline stages", t__csv=TRACE_30),
    case("issue35-plan-tp-fills-node", "plan -w {d}/t.csv --slo ttft_p99=1s -H h100-sxm --tp 8 --target-qps 1 -m llama-3.1-405b", "tp 8 fills a node", t__csv=TRACE_30),
    case("issue35-qwen2-sliding-no-window", "models {d}/config.json", "sliding_window: required with use_sliding_window", config__json=json.dumps({"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "use_sliding_window": True, "max_window_layers": 2})),
    case("issue35-qwen2-sliding-no-layer", "models {d}/config.json", "use_sliding_window: is true but no layer slides", config__json=json.dumps({"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "use_sliding_window": True, "sliding_window": 128, "max_window_layers": 4})),
    case("issue35-models-path", "models {d}/config.json", OK, config__json=json.dumps({"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000})),
    case("issue35-models-unknown-name", "models llama-9", "models: llama-9: unknown model"),
    # ---- flags that would be silently ignored ----
    case("ignored-min-finished-without-slo", f"{SIM30} --min-finished 0.5", "--min-finished: has no effect", t__csv=TRACE),
    case("ignored-sweep-min-finished-without-slo", "sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --no-plots --min-finished 0.5", "--min-finished", t__csv=TRACE),
    case("ignored-validate-tp-without-file", "validate {d}/v.csv --tp 4", "--tp: describes a bench JSON", v__csv=vrow()),
    case("ignored-validate-model-without-file", "validate {d}/v.csv -m llama-3-70b", "--model", v__csv=vrow()),
    case("ignored-calibrate-engine-model-with-csv", f"{CE_CSV} -m llama-3-70b", "--model", v__csv=vrow()),
    case("ignored-save-detailed-without-out", f"{SIM30} --save-detailed", "--save-detailed", t__csv=TRACE),
    # ---- unknown names ----
    case("unknown-plan-engine", f"{PLAN} --target-qps 1 --engine nope", "nope", t__csv=TRACE_30),
    case("unknown-disagg-model", "disagg -t {d}/t.csv -m llama-9", "llama-9", t__csv=TRACE),
    case("unknown-disagg-policy", "disagg -t {d}/t.csv --policy fifo", "fifo", t__csv=TRACE),
    case("unknown-roofline-model", "roofline -m llama-9", "llama-9"),
    case("unknown-memory-kv-dtype", "memory --kv-dtype fp3", "fp3"),
    case("unknown-calibrate-engine-preset", f"{CE_CSV} --engine nope", "nope", v__csv=vrow()),
    case("unknown-simulate-spec-method", f"{SIM30} --spec-tokens 2 --spec-method magic", "magic", t__csv=TRACE),
    case("unknown-simulate-preemption-mode", f"{SIM30} --preemption-mode drop", "drop", t__csv=TRACE),
    case("unknown-simulate-radix-ordering", f"{SIM30} --policy radix --radix-ordering random", "random", t__csv=TRACE),
    case("unknown-sweep-grid-engine", "sweep -g engine=nope -t {d}/t.csv -o {d}/out --no-plots", "nope", t__csv=TRACE),
    case("unknown-day-hardware", "day run {d}/day.yaml --out {d}/out --no-plot", "h900", day__yaml=DAY.replace("hardware: h100-sxm", "hardware: h900")),
    case("unknown-day-router", "day run {d}/day.yaml --out {d}/out --no-plot", "router", day__yaml=DAY.replace("router: round_robin", "router: fastest")),
    case("unknown-plan-search-knob", f"{PLAN} --target-qps 1 --search speed=1,2", "--search", t__csv=TRACE_30),
    case("unknown-workload-sample-format", "workload sample {d}/s.yaml --out {d}/o.csv", "o.csv must end in .jsonl", s__yaml=spec(GOOD_SYNTH)),
    # ---- conflicting flags ----
    case("conflict-qps-and-trace-qps", f"{SIM30} --qps 2 --trace-qps 2", "--qps", t__csv=TRACE),
    case("conflict-prefix-caching-and-static", f"{SIM30} --enable-prefix-caching --policy static", "static", t__csv=TRACE),
    case("conflict-replicas-and-replica-hardware", f"{SIM30} --replicas 3 --replica-hardware h100-sxm,h200", "replica", t__csv=TRACE),
    case("conflict-bench-and-format", "simulate --bench requests=4,isl=10,osl=5 --format azure", "--bench"),
    case("conflict-validate-two-kinds", "validate {d}/v.csv {d}/bench_serve.json", "one per-request", v__csv=vrow(), bench_serve__json=BENCH_SERVE),
    case("conflict-plan-no-verify-uncertainty", f"{PLAN} --target-qps 1 --no-verify --disagg 1:1", "--disagg", t__csv=TRACE_30),
]



NUMERIC_CASES = numeric_cases()
ALL_CASES = MALFORMED_CASES + ISSUE_CASES + NUMERIC_CASES + DESTINATION_CASES

# ---- issue 51 item 2: every file reader x {FIFO, /dev/zero, folder, deep nesting, repeated key, wrong type} ----
from tests.reader_corpus import reader_cases  # noqa: E402 (it reads DAY above)

READER_CASES = reader_cases()
ALL_CASES = ALL_CASES + READER_CASES

# issue 51 items 3 and 4 (tests/bounds_corpus.py): physical fields x {x 10^3, x 10^9, 1e300}
from tests.bounds_corpus import physical_cases, physics_issue_cases, search_space_cases  # noqa: E402

PHYSICAL_CASES = physical_cases() + physics_issue_cases()
SEARCH_SPACE_CASES = search_space_cases()  # issue 51 item 4: every search space x {10^4, 10^6 points}
ALL_CASES = ALL_CASES + PHYSICAL_CASES + SEARCH_SPACE_CASES
