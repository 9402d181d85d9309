"""`otelcol validate` of every collector config in the repository, with the collector built from
stack/otelcol (the components and release of the compose image), and what a broken config does."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from .components import Binaries, start_collector
from .procs import ROOT, ServiceFailed, Stack

CONFIGS = sorted(p.name for p in (ROOT / "collector").glob("*.yaml") if p.name != "contrib-components.yaml")


def validate(binaries: Binaries, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binaries.otelcol, "validate", f"--config={config}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_config_is_checked() -> None:
    assert CONFIGS == ["agent.yaml", "gateway.yaml", "otelcol.yaml"]


@pytest.mark.parametrize("name", CONFIGS)
def test_otelcol_validate(binaries: Binaries, name: str) -> None:
    result = validate(binaries, ROOT / "collector" / name)
    assert result.returncode == 0, result.stdout + result.stderr


def broken_copy(tmp_path: Path) -> Path:
    """A test copy of collector/otelcol.yaml with an unknown processor in the traces pipeline."""
    cfg: dict[str, Any] = yaml.safe_load((ROOT / "collector" / "otelcol.yaml").read_text())
    cfg["processors"]["no_such_processor"] = {}
    cfg["service"]["pipelines"]["traces"]["processors"].append("no_such_processor")
    path = tmp_path / "otelcol-broken.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


COLLECTOR_MESSAGE = 'unknown type: "no_such_processor"'


def test_validate_rejects_an_unknown_processor(binaries: Binaries, tmp_path: Path) -> None:
    result = validate(binaries, broken_copy(tmp_path))
    assert result.returncode != 0
    assert COLLECTOR_MESSAGE in result.stdout + result.stderr


def test_a_broken_config_fails_the_start_at_once_with_the_collectors_message(
    binaries: Binaries, tmp_path: Path
) -> None:
    started = time.monotonic()
    with Stack(tmp_path / "logs") as stack, pytest.raises(ServiceFailed) as failure:
        start_collector(stack, "collector-broken", binaries.otelcol, broken_copy(tmp_path), tmp_path / "out")
    assert time.monotonic() - started < 15, "a config error must not wait for the startup timeout"
    assert "exited with code" in str(failure.value)
    assert COLLECTOR_MESSAGE in str(failure.value)
