"""Names of the traces and specs bundled in `workloads/` (see workloads/README.md)."""

from __future__ import annotations

from pathlib import Path

from sim.errors import InputError
from sim.paths import bundled_dir

BUNDLED_TRACES = {
    "azure_code_2023": "AzureLLMInferenceTrace_code.csv",
    "azure_conv_2023": "AzureLLMInferenceTrace_conv.csv",
    "mooncake_conversation": "mooncake_conversation.jsonl",
    "mooncake_synthetic": "mooncake_synthetic.jsonl",
    "splitwise_code": "splitwise_code.csv",
    "splitwise_conv": "splitwise_conv.csv",
    "sharegpt": "sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
    "sharegpt_bench": "sharegpt_v3_first_turn_llama3.csv",
    "sharegpt_bench_llama3": "sharegpt_v3_first_turn_llama3.csv",
    "sharegpt_bench_mistral_v1": "sharegpt_v3_first_turn_mistral_v1.csv",
}
_SUFFIXES = (".csv", ".jsonl", ".yaml", ".yml")


def bundled_names() -> list[str]:
    """Every name `resolve_workload` accepts without a path: trace aliases and file stems."""
    folder = bundled_dir("workloads")
    stems = (
        {p.stem for p in folder.glob("*") if p.suffix in _SUFFIXES} if folder.is_dir() else set()
    )
    return sorted(set(BUNDLED_TRACES) | stems)


def resolve_workload(path_or_name: str | Path) -> Path:
    """An existing path as is; else a bundled alias, file name or file stem in `workloads/`."""
    path = Path(path_or_name)
    if path.exists():
        if not path.is_file():
            raise InputError(str(path), None, "is not a file; expected a trace file or a spec YAML")
        return path
    name = str(path_or_name)
    folder = bundled_dir("workloads")
    if path.parent == Path(".") and folder.is_dir():
        candidates = [folder / BUNDLED_TRACES.get(name, name)]
        candidates += [folder / f"{name}{suffix}" for suffix in _SUFFIXES]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
    raise InputError(
        name, None, f"no such file or bundled workload (bundled: {', '.join(bundled_names())})"
    )
