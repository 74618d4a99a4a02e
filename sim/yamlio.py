"""Reading user files: every file the CLI reads (configs, model configs, profiles, presets, specs,
traces, measurement files) is opened here, bounded, and parsed into plain data or pydantic
models with one-line errors.

Bounded means: what is not a regular file (a FIFO, which would block the open forever; a device
such as /dev/zero, which never ends; a folder) is refused from its `stat` before any open; a file
above its size limit is refused before it is read whole; nesting deeper than `MAX_NESTING` is
refused before the recursive parsers (json's C scanner, PyYAML's composer) reach Python's
recursion limit; a key given twice in one JSON object or YAML mapping is refused with its name
(both parsers would keep the last value without a word)."""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections import Counter
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sim.errors import InputError

M = TypeVar("M", bound=BaseModel)

MAX_NESTING = 64  # lists/objects inside each other: configs use < 10; Python recursion starts near 1000
MAX_MAPPING_BYTES = 16 << 20  # a config, model config, profile, preset or spec: kilobytes in practice
MAX_DOCUMENT_BYTES = 1 << 30  # a measurement file read whole (per-request JSON/JSONL, OTLP spans)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "something other than a regular file"


def check_regular_file(path: str | Path) -> Path:
    """`path` when it is a regular file (symlinks followed); InputError otherwise, decided from
    `stat` alone: opening a FIFO blocks until a writer comes, reading /dev/zero never ends."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(path, None, "cannot read file (no such file)") from None
    except OSError as exc:
        raise InputError(path, None, f"cannot read file ({exc.strerror or exc.__class__.__name__})") from None
    if not stat.S_ISREG(mode):
        raise InputError(path, None, f"is not a file but {_kind_of(mode)}; give a regular file")
    return path


def open_regular_file(path: str | Path):
    """A binary file object for a regular file, never blocking: checked by `check_regular_file`,
    opened with O_NONBLOCK (a FIFO swapped in after the check still cannot block the open) and
    checked again on the open descriptor."""
    path = check_regular_file(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(path, None, f"cannot read file ({exc.strerror or exc.__class__.__name__})") from None
    handle = os.fdopen(descriptor, "rb")
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        handle.close()
        raise InputError(path, None, f"is not a file but {_kind_of(mode)}; give a regular file")
    return handle


def read_bytes_bounded(path: str | Path, max_bytes: int = MAX_MAPPING_BYTES) -> bytes:
    """The whole content of a regular file of at most `max_bytes`; InputError otherwise."""
    with open_regular_file(path) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(path, None, f"larger than the limit of {_size(max_bytes)} for this kind of file")
    return data


def read_text_bounded(path: str | Path, max_bytes: int = MAX_MAPPING_BYTES) -> str:
    """`read_bytes_bounded` decoded as UTF-8 (a leading byte-order mark dropped)."""
    data = read_bytes_bounded(path, max_bytes)
    try:
        return data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, None, "not UTF-8 text") from None


def _size(n_bytes: int) -> str:
    return f"{n_bytes >> 30} GiB" if n_bytes >= 1 << 30 else f"{n_bytes >> 20} MiB"


def json_nested_too_deep(text: str) -> bool:
    """Whether lists and objects in JSON `text` nest deeper than MAX_NESTING (brackets inside
    strings do not count); linear, never recursive, and a count of brackets only when the text
    has few of them, as configs and trace lines do."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return False
    depth = 0
    for char in re.sub(r"[^\[\]{}]", "", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        if depth > MAX_NESTING:
            return True
    return False


class _RepeatedKey(ValueError):
    def __init__(self, key: str):
        self.key = key
        super().__init__(key)


_JSON_KEY = re.compile(r'"([^"\\]*)"\s*:')  # without escapes in the text, exactly the keys of every object


def _may_repeat_a_key(text: str) -> bool:
    """False when no key appears twice in the whole text (no object can repeat one): the common
    case, parsed without the per-object hook that costs the JSONL reader half its speed."""
    if "\\" in text:  # an escaped key ("a\u0062" is "ab") is not matched as written: check exactly
        return True
    keys = _JSON_KEY.findall(text)
    return len(set(keys)) != len(keys)


def _pairs_without_repeats(pairs: list) -> dict:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        raise _RepeatedKey(next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return mapping


def loads_json(text: str | bytes, where: str | Path):
    """json.loads bounded in depth and refusing a key given twice (InputError naming it); a
    malformed document stays a json.JSONDecodeError, for readers that try another reading."""
    if isinstance(text, bytes):
        try:
            text = text.removeprefix(codecs.BOM_UTF8).decode("utf-8")  # (the utf-8-sig codec is slow)
        except UnicodeDecodeError:
            raise InputError(where, None, "not UTF-8 text") from None
    if text.count("[") + text.count("{") > MAX_NESTING and json_nested_too_deep(text):  # (the hot path: counts only)
        raise InputError(where, None, f"lists/objects nested more than {MAX_NESTING} deep; flatten it")
    if not _may_repeat_a_key(text):
        return json.loads(text)
    try:
        return json.loads(text, object_pairs_hook=_pairs_without_repeats)
    except _RepeatedKey as exc:
        raise InputError(where, str(exc.key), "given twice in one object; give each key once") from None


def parse_json(text: str | bytes, where: str | Path):
    """`loads_json` with a malformed document as an InputError too."""
    try:
        return loads_json(text, where)
    except json.JSONDecodeError as exc:
        raise InputError(where, None, f"not valid JSON ({str(exc).splitlines()[0]})") from None


class _NoAliasLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses aliases (`*name`: a 300-byte file of nested aliases, a
    "billion laughs" bomb, expands to billions of nodes for whatever walks the result), keys
    given twice in one mapping, and nesting deeper than MAX_NESTING (the composer recurses)."""

    _depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, f"aliases (*name) are not accepted, line {mark.line + 1}; "
                                                          "write the value out", None)
        if self._depth >= MAX_NESTING:
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, f"lists/mappings nested more than {MAX_NESTING} deep, "
                                                          f"line {mark.line + 1}; flatten it", None)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

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
    """yaml.safe_load without aliases, repeated keys or deep nesting (`_NoAliasLoader`): every
    user YAML is read through it."""
    loader = _NoAliasLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_yaml(text: str, where: str | Path):
    """`load_yaml` with a malformed document as an InputError naming `where`."""
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise InputError(where, None, f"not valid YAML ({str(exc).splitlines()[0]})") from None


def read_document(path: str | Path, max_bytes: int = MAX_MAPPING_BYTES):
    """A bounded regular file parsed as JSON (`.json`) or YAML (anything else)."""
    path = Path(path)
    text = read_text_bounded(path, max_bytes)
    return parse_json(text, path) if path.suffix.lower() == ".json" else parse_yaml(text, path)


def read_mapping(path: Path) -> dict:
    """Parse a YAML or JSON file that must hold a mapping; InputError otherwise."""
    data = read_document(path)
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


MAPPING_ERRORS = ("model_type", "model_attributes_type", "dataclass_type", "dict_type")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} {text[:50]}..."


def describe_error(error: dict) -> str:
    """A pydantic error as the part of the one line after `file: field:`."""
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] in MAPPING_ERRORS:  # pydantic's text names our internal model ("instance of Overhead")
        return f"must be a mapping of keys to values (got {_shown(error.get('input'))})"
    message = error["msg"].removeprefix("Value error, ")
    if not error["loc"] or error["type"] == "value_error":  # a check of ours: its message says it all
        return message
    return f"{message} (got {error.get('input')!r})"
