"""The binaries that ran are the versions docker-compose.yml pins (its image tags).

tests/stack checks the tags against what scripts/build-stack.sh derives from stack/*/go.mod; here
the binaries themselves are asked (`--version`, `version`). Prometheus's answer is its own (Debian's
build); the Collector's and Jaeger's are stamped by scripts/build-stack.sh from go.mod, so for them
this checks that the binaries that ran are the ones built for the pinned versions (not a stale
cache entry), while tests/stack ties the Jaeger module version to its v2 release.
"""

from __future__ import annotations

import re
import subprocess

from .components import Binaries, compose_service


def version_output(*argv: str) -> str:
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def image_tag(service: str) -> str:
    return str(compose_service(service)["image"]).rsplit(":", 1)[1]


def test_prometheus_that_ran_is_the_compose_tag(binaries: Binaries) -> None:
    # "prometheus, version 2.42.0+ds (branch: debian/sid, revision: 2.42.0+ds-5+deb12u1)"
    out = version_output(binaries.prometheus, "--version")
    found = re.search(r"^prometheus, version (\d+\.\d+\.\d+)", out, re.MULTILINE)
    assert found, out
    assert image_tag("prometheus") == f"v{found.group(1)}", out
    print(f"prometheus: {out.splitlines()[0]}; compose: prom/prometheus:{image_tag('prometheus')}")


def test_collector_that_ran_is_the_compose_tag(binaries: Binaries) -> None:
    out = version_output(binaries.otelcol, "--version")
    assert out.split()[-1] == image_tag("collector"), out
    print(f"collector: {out.strip()}; compose: {compose_service('collector')['image']}")


def test_jaeger_that_ran_is_the_compose_tag(binaries: Binaries) -> None:
    out = version_output(binaries.jaeger, "version")
    found = re.search(r'"gitVersion":\s*"v?([^"]+)"', out)
    assert found, out
    assert found.group(1) == image_tag("jaeger"), out
    print(f"jaeger: {found.group(0)}; compose: {compose_service('jaeger')['image']}")
