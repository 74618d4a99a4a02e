"""Reading YAML/JSON user files into pydantic models with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sim.errors import InputError

M = TypeVar("M", bound=BaseModel)


class _NoAliasLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses aliases (`*name`: a 300-byte file of nested aliases, a
    "billion laughs" bomb, expands to billions of nodes for whatever walks the result) and keys
    given twice in one mapping."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, f"aliases (*name) are not accepted, line {mark.line + 1}; "
                                                          "write the value out", None)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        """A key given twice is refused (PyYAML would silently keep the last)."""
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key_node.value!r} given twice, line {key_node.start_mark.line + 1}; give "
                                    "each key once", None)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str):
    """yaml.safe_load without aliases or repeated keys (`_NoAliasLoader`): every user YAML is read through it."""
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_mapping(path: Path) -> dict:
    """Parse a YAML or JSON file that must hold a mapping; InputError otherwise."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"cannot read file ({exc.__class__.__name__})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
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
        raise InputError(where, field, describe_error(first)) from None


def describe_error(error: dict) -> str:
    """A pydantic error as the part of the one line after `file: field:`."""
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    message = error["msg"].removeprefix("Value error, ")
    if not error["loc"] or error["type"] == "value_error":  # a check of ours: its message says it all
        return message
    return f"{message} (got {error.get('input')!r})"
