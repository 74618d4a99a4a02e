"""Hostile files for every reader of the CLI (issue 51 item 2): each file a command reads, given
as a FIFO, as /dev/zero (a symlink to it, so the reader's suffix rules still apply), as a folder,
nested 1000 deep, with a key given twice, and with each field of a wrong JSON type.

`READERS` names each reader once (the command line that reads it, a valid file for it); the
cases are generated from it: a reader added here gets every class without a line per case.
Each case must end in one `error:` line naming the file (or field) and exit 2, within
`ReaderCase.timeout_s` (a FIFO that blocks the open is a hang, not a slow case).
`READER_CASES` joins tests/hostile_corpus.py's ALL_CASES; `reader_class` names a case's class
for bench/bench_bad_input.py's table.
"""

# ruff: noqa: E501 (one reader per line, however long)
from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import yaml

from sim.inputs.model.hf.quant import CT_GROUP_FIELDS, CT_WEIGHT_FIELDS, METHOD_FIELDS
from sim.validate.measured.vllm_bench import PER_REQUEST_KEYS
from tests.destination_corpus import Fifo, Symlink
from tests.malformed_corpus import (
    BENCH,
    DAY,
    GEMM_ROW,
    GOOD_SYNTH,
    HF,
    MEASUREMENT_HEADER,
    MODEL,
    PRESET,
    PROFILE,
    ROOT,
    TRACE,
    Case,
    spec,
    vrow,
)

DEEP = 1000  # far past MAX_NESTING (64) and past what Python's recursion limit lets a parser reach


@dataclass
class ReaderCase(Case):
    timeout_s: int = 20  # a reader that blocks on a FIFO is killed here, and judged a hang


@dataclass(frozen=True)
class Reader:
    argv: str  # `{f}` is the file under test, `{d}` the case folder
    name: str  # the file's name in the case folder (its suffix picks the parser)
    data: object  # the valid content: a dict / list of dicts (YAML, JSON, JSONL) or text (CSV)
    files: dict | None = None  # other files the command needs
    fields: tuple | None = None  # fields for the wrong-type class (None: every top-level key)
    nested: bool = True  # False for CSV: no nesting, no keys

    def text(self, data=None) -> str:
        data = self.data if data is None else data
        if self.name.endswith(".jsonl"):
            return "".join(json.dumps(row) + "\n" for row in data)
        if self.name.endswith(".json"):
            return json.dumps(data)
        return data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)


TRACE_ROWS = [{"arrival_s": i * 0.5, "prompt_tokens": 100, "output_tokens": 10} for i in range(3)]
POOL = {"hardware": "h100-sxm", "billing": "node", "tp": [1], "policy": ["chunked"], "max_requests": 30,
        "models": [{"name": "chat", "model": "llama-3-8b", "workload": "splitwise_conv", "target_qps": 1,
                    "slo": {"ttft_p99": "2s"}}]}
VLLM_BENCH = json.loads((ROOT / "tests" / "fixtures" / "measured" / "vllm_bench_detailed.json").read_text())
AIPERF = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "measured" / "aiperf_profile_export.jsonl").read_text().splitlines() if line.strip()]
OTLP = [json.loads(line) for line in (ROOT / "tests" / "fixtures" / "measured" / "vllm_otlp_spans.jsonl").read_text().splitlines() if line.strip()]
MEASURED = "--engine vllm -m llama-3.1-8b -H h100"
T = {"t.csv": TRACE}

def readers() -> dict[str, Reader]:
    """Every file reader of the CLI, by name: the command line that reads it and a valid file."""
    return {**_READERS, "day-spec": Reader("day run {f} --out {d}/out --no-plot", "day.yaml", yaml.safe_load(DAY)),
            "day-plan-spec": Reader("day plan {f}", "day.yaml", yaml.safe_load(DAY))}


_READERS = {
    "hf-config": Reader("memory -m {f}", "config.json", HF),
    "model-spec": Reader("memory -m {f}", "m.yaml", MODEL),
    "hardware-profile": Reader("memory -H {f}", "p.yaml", PROFILE),
    "calibration-profile": Reader("validate {d}/v.csv --hardware-profile {f}", "p.yaml", PROFILE, {"v.csv": vrow()}),
    "engine-preset": Reader("simulate -t {d}/t.csv --max-requests 3 --engine {f}", "e.yaml", PRESET, T),
    "run-config": Reader("simulate -t {d}/t.csv --max-requests 3 -c {f}", "c.yaml", {"max_num_seqs": 8, "block_size": 16, "policy": "chunked"}, T),
    "sweep-base": Reader("sweep -g max_num_seqs=8 -t {d}/t.csv -o {d}/out --no-plots -b {f}", "b.yaml", {"block_size": 16, "policy": "chunked"}, T),
    "workload-spec": Reader("simulate --max-requests 3 -t {f}", "s.yaml", yaml.safe_load(spec(GOOD_SYNTH))),
    "pool-spec": Reader("pool plan {f}", "pool.yaml", POOL),
    "jsonl-trace": Reader("simulate --max-requests 3 -t {f}", "t.jsonl", TRACE_ROWS),
    "csv-trace": Reader("simulate --max-requests 3 -t {f}", "t.csv", TRACE, nested=False),
    "vllm-bench-per-request": Reader(f"validate {{f}} {MEASURED}", "r.json", VLLM_BENCH, fields=(*PER_REQUEST_KEYS, "start_times", "errors", "itls")),
    "aiperf-per-request": Reader(f"validate {{f}} {MEASURED}", "r.jsonl", AIPERF, fields=("metadata", "metrics")),
    "otlp-per-request": Reader(f"validate {{f}} {MEASURED}", "s.jsonl", OTLP),
    "bench-result": Reader("calibrate engine {f} -o {d}/e.yaml -m llama-3-8b -H h100-sxm", "b.json", BENCH),
    "validate-table": Reader("validate {f}", "v.csv", vrow(), nested=False),
    "measured-table": Reader("calibrate report h100-sxm {f}", "m.csv", MEASUREMENT_HEADER + GEMM_ROW, nested=False),
}


def _wrong(value):
    """A value of another JSON type than `value`: text for a mapping or list, a mapping otherwise."""
    return "x" if isinstance(value, (dict, list)) else {"a": 1}


def _first(data) -> dict:
    return data[0] if isinstance(data, list) else data


def _reader_case(reader: Reader, case_id: str, expected: str, content=None, argv_file: str | None = None) -> ReaderCase:
    files = {**(reader.files or {}), reader.name: reader.text() if content is None else content}
    argv = reader.argv.replace("{f}", argv_file or "{d}/" + reader.name)
    return ReaderCase(case_id, argv.split(), expected, files)


def _deep(reader: Reader) -> str:
    """The valid file with one more top-level key holding lists nested DEEP deep."""
    nest = "[" * DEEP + "]" * DEEP
    if reader.name.endswith((".json", ".jsonl")):
        text = reader.text()
        return '{"deep": ' + nest + ", " + text[1:]
    return f"deep: {nest}\n" + reader.text()


def _repeated(reader: Reader) -> tuple[str, str]:
    """(the valid file with its first key given twice, what the error line must say)."""
    key = next(iter(_first(reader.data)))
    text = reader.text()
    if reader.name.endswith((".json", ".jsonl")):
        lines = text.splitlines(keepends=True)
        where = len(lines) - 1 if len(lines) > 1 else 0  # a JSONL file: the LAST line (past the sniffed head)
        lines[where] = "{" + json.dumps(key) + ": 0, " + lines[where][1:]
        return "".join(lines), f"{key}: given twice"
    return text + f"{key}: 0\n", f"key {key!r} given twice"


def _wrong_types(reader: Reader, label: str) -> list[ReaderCase]:
    cases = []
    first = _first(reader.data)
    for key in reader.fields or list(first):
        data = copy.deepcopy(reader.data)
        row = _first(data)
        row[key] = _wrong(row[key])
        cases.append(_reader_case(reader, f"reader-type-{label}-{key}", key, reader.text(data)))
    return cases


def _quantization_cases() -> list[ReaderCase]:
    """Each field each modelled quant_method reads, of a wrong type: the line names the field."""
    hf = _READERS["hf-config"]
    group = {"weights": {"num_bits": 4, "type": "int"}, "targets": ["Linear"]}
    valid = {"fp8": {"fmt": "e4m3"}, "mxfp4": {}, "modelopt": {"quant_algo": "NVFP4"}, "awq": {"bits": 4},
             "gptq": {"bits": 4}, "compressed-tensors": {"config_groups": {"group_0": group}}}
    cases = []
    for method, fields in METHOD_FIELDS.items():
        for name, types in fields.items():
            q = {"quant_method": method, **valid[method], name: "x" if str not in types else 7}
            cases.append(_reader_case(hf, f"reader-quant-{method}-{name}", f"quantization_config.{name}",
                                      hf.text({**HF, "quantization_config": q})))
    for fields, path in ((CT_GROUP_FIELDS, ()), (CT_WEIGHT_FIELDS, ("weights",))):
        for name, types in fields.items():
            g = copy.deepcopy(group)
            node = g["weights"] if path else g
            node[name] = "x" if str not in types else 7
            q = {"quant_method": "compressed-tensors", "config_groups": {"group_0": g}}
            field = ".".join(("quantization_config.config_groups.group_0", *path, name))
            cases.append(_reader_case(hf, f"reader-quant-ct-{'-'.join((*path, name))}", field,
                                      hf.text({**HF, "quantization_config": q})))
    q = {"quant_method": "compressed-tensors", "config_groups": [group]}
    cases.append(_reader_case(hf, "reader-quant-ct-groups-list", "quantization_config.config_groups",
                              hf.text({**HF, "quantization_config": q})))
    cases.append(_reader_case(hf, "reader-hf-model-type-list", "model_type", hf.text({**HF, "model_type": ["llama"]})))
    return cases


def reader_cases() -> list[ReaderCase]:
    """Every reader x {FIFO, /dev/zero, folder, deep nesting, repeated key, wrong type per field}."""
    cases = []
    for label, reader in readers().items():
        suffix = "." + reader.name.rsplit(".", 1)[1]
        base = _reader_case(reader, "", "")
        for kind, special in (("fifo", Fifo()), ("dev-zero", Symlink("/dev/zero"))):
            files = {**base.files, reader.name: special}
            cases.append(ReaderCase(f"reader-{kind}-{label}", base.argv, "is not a file", files))
        folder = {**base.files}
        folder.pop(reader.name)
        folder[f"{reader.name}/inside{suffix}"] = reader.text()
        cases.append(ReaderCase(f"reader-folder-{label}", base.argv, "is not a file", folder))
        if not reader.nested:
            continue
        cases.append(_reader_case(reader, f"reader-deep-{label}", "nested more than 64 deep", _deep(reader)))
        text, expected = _repeated(reader)
        cases.append(_reader_case(reader, f"reader-repeated-key-{label}", expected, text))
        cases += _wrong_types(reader, label)
    return cases + _quantization_cases()


def reader_class(case_id: str) -> str:
    """The class of a reader case: fifo, dev-zero, folder, deep, repeated-key, type, quant."""
    rest = case_id.removeprefix("reader-")
    for kind in ("fifo", "dev-zero", "folder", "deep", "repeated-key", "type", "quant", "hf"):
        if rest.startswith(kind + "-"):
            return "wrong type" if kind in ("type", "quant", "hf") else kind
    return "other"

