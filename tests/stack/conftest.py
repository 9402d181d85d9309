"""Shared helpers of the deployment-stack checks (tests/stack)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLER = "scripts/install-stack-tools.sh"


def load_yaml(path: Path) -> Any:
    yaml = pytest.importorskip("yaml", reason=f"PyYAML missing: run {INSTALLER}")
    with path.open() as fh:
        return yaml.safe_load(fh)


def require_tool(name: str) -> str:
    """Path of a command-line tool, or skip naming the installer that provides it."""
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} not installed: run {INSTALLER} (CI does)")
    return found
