"""Reading YAML/JSON user files into pydantic models with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sim.errors import InputError

M = TypeVar("M", bound=BaseModel)


def read_mapping(path: Path) -> dict:
    """Parse a YAML or JSON file that must hold a mapping; InputError otherwise."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"cannot read file ({exc.__class__.__name__})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise InputError(path, None, f"not valid {kind} ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "must hold a mapping of keys to values")
    return data


def validate(model_type: type[M], data: dict, where: Path | str) -> M:
    """Build a pydantic model; the first validation error becomes a one-line InputError."""
    try:
        return model_type.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise InputError(where, field, _describe(first)) from None


def _describe(error: dict) -> str:
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    message = error["msg"].removeprefix("Value error, ")
    if not error["loc"] or error["type"] == "value_error":  # a check of ours: its message says it all
        return message
    return f"{message} (got {error.get('input')!r})"
