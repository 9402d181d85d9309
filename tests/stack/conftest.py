"""Shared helpers of the deployment-stack checks (tests/stack)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLER = "scripts/install-stack-tools.sh"


def _missing(what: str) -> NoReturn:
    """Skip on a developer machine; fail in CI, where the installer has run and a skip would hide a gap."""
    message = f"{what}: run {INSTALLER}"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must not skip the stack checks)")
    pytest.skip(message)


def load_yaml(path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        _missing("PyYAML missing")
    with path.open() as fh:
        return yaml.safe_load(fh)


def load_yaml_text(text: str) -> Any:
    try:
        import yaml
    except ImportError:
        _missing("PyYAML missing")
    return yaml.safe_load(text)


def require_tool(name: str) -> str:
    """Path of a command-line tool, or skip naming the installer that provides it."""
    found = shutil.which(name)
    if found is None:
        _missing(f"{name} not installed")
    return found


_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def as_deployed(value: Any) -> Any:
    """A collector config as the compose stack runs it: every ``${env:NAME:-default}`` replaced by its
    default (compose sets none of those variables; ``make stack-test`` sets them to loopback ports),
    ``${env:NAME}`` without default by ''."""
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: m.group(2) or "", value)
    if isinstance(value, dict):
        return {k: as_deployed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_deployed(v) for v in value]
    return value
