"""Finding a model: a bundled spec by name, a user's YAML, or a Hugging Face config.json."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from sim.errors import InputError
from sim.inputs.model.hf import from_hf_config
from sim.inputs.model.spec import ModelSpec
from sim.paths import model_specs_dir
from sim.yamlio import read_mapping, validate


def bundled_models() -> list[str]:
    return sorted(p.stem for p in model_specs_dir().glob("*.yaml"))


@lru_cache(maxsize=64)
def load_model(name_or_path: str) -> ModelSpec:
    """A bundled spec by name (`llama-3-8b`), a user's YAML, or a HF `config.json` path (offline)."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml", ".json"):
        path = model_specs_dir() / f"{name_or_path}.yaml"
        if not path.is_file():
            allowed = ", ".join(bundled_models())
            raise InputError("--model", None, f"unknown model {name_or_path!r}; bundled: {allowed}")
    elif not path.exists():
        raise InputError(path, None, "file not found")  # a FIFO, device or folder: read_mapping names it
    data = read_mapping(path)
    if path.suffix == ".json":
        data = from_hf_config(data, path)
    return validate(ModelSpec, data, path)
