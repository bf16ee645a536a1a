"""Options shared by sub-commands: policy files, policy parameters, ``KEY=VALUE`` values."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError


def json_or_text(text: str):
    """``text`` parsed as JSON when it parses (``[100,200]``, ``true``, ``0.5``), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def split_assignment(item: str, option: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key with '-' as '_', value via :func:`json_or_text`)."""
    key, sep, value = item.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or not key:
        raise ConfigError(f"{option} {item!r}: use KEY=VALUE")
    return key, json_or_text(value)


def add_policy_file_option(p) -> None:
    p.add_argument("--policy-file", action="append", default=[], type=Path, metavar="FILE.py",
                   help="a Python file that defines and @register-s policies (repeatable)")


def load_policy_files(paths) -> None:
    from ..policies import load_policy_file
    for path in paths:
        load_policy_file(path)


def parse_policy_params(items) -> dict[str, dict]:
    """``["tiresias.thresholds=[100,200]", ...]`` -> ``{"tiresias": {"thresholds": [100, 200]}}``."""
    params: dict[str, dict] = {}
    for item in items:
        name, dot, rest = item.partition(".")
        if not dot or not name.strip():
            raise ConfigError(f"--param {item!r}: use POLICY.KEY=VALUE, e.g. tiresias.thresholds=[100,200]")
        key, value = split_assignment(rest, f"--param {name}.")
        params.setdefault(name.strip(), {})[key] = value
    return params
