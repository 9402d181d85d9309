"""llama.cpp's ``llama-server`` on 127.0.0.1, serving a tiny random model (:mod:`.tiny_model`).

The binary comes from ``scripts/build-llama-server.sh`` (built once into
``~/.cache/openai-latency/realserver``). Each server is a :class:`tests.realstack.procs.Service`:
started in its own session, dying with pytest (PR_SET_PDEATHSIG), stopped by PID by the fixture
that started it, and checked for leftovers at the end of the session (conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.processes import free_port
from tests.realstack.procs import ROOT, Service, http_ok

from .tiny_model import ModelShape, prompt_of

BUILD_SCRIPT = ROOT / "scripts" / "build-llama-server.sh"


def server_binary() -> Path:
    """``LLAMA_SERVER_BIN``, else what the build script has cached (it fails if nothing is built:
    ``make realserver-test`` builds first)."""
    given = os.environ.get("LLAMA_SERVER_BIN")
    if given:
        return Path(given)
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-env"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"llama-server is not built: {out.stderr.strip()} (run make realserver-test)")
    line = next(x for x in out.stdout.splitlines() if x.startswith("LLAMA_SERVER_BIN="))
    return Path(line.split("=", 1)[1])


@dataclass
class LlamaServer:
    """A running ``llama-server``: one slot (``-np 1``: requests run one at a time, as ordered),
    ``threads`` CPU threads for prefill and decode, a 2,048-token context."""

    service: Service
    port: int
    shape: ModelShape
    threads: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @classmethod
    def start(
        cls,
        binary: Path,
        model: Path,
        shape: ModelShape,
        log_dir: Path,
        threads: int = 1,
        cache_prompt: bool = True,
    ) -> LlamaServer:
        port = free_port()
        argv = [
            str(binary),
            "--model", str(model),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--ctx-size", str(shape.context),
            "--parallel", "1",
            "--threads", str(threads),
            "--threads-batch", str(threads),
            "--no-webui",
            "--alias", shape.name,
            # No RAM prompt cache (llama.cpp PR 16391, on by default): taking the slot for a new
            # prompt would first copy the slot's KV cache into it, outside the server's prompt_ms:
            # 2-5 ms here for a short context, 23-28 ms for a 1,024-token one once the session's
            # tests had filled the cache (12-15 ms per request on a freshly booted CI machine). The
            # slot's own KV cache still serves a repeated prompt (cache_n) with cache_prompt on.
            "--cache-ram", "0",
        ]  # fmt: skip
        if not cache_prompt:
            argv.append("--no-cache-prompt")
        service = Service(
            f"llama-server-{shape.name}-t{threads}{'' if cache_prompt else '-nocache'}",
            argv,
            log_dir,
            ready=lambda: http_ok(f"http://127.0.0.1:{port}/health"),
            startup_timeout=60.0,
        )
        return cls(service, port, shape, threads)

    def stop(self) -> None:
        self.service.stop()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A plain JSON request (no SDK, no instrumentation): warm-ups and ground truth."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result

    def warm_up(self) -> None:
        """The first requests of a fresh server allocate buffers: send a few, and a long one (the
        batch buffers of a 1,024-token prefill), before anything is measured."""
        for tokens in (8, 1024, 8):
            self.chat_plain(prompt_of(tokens, salt=99 + tokens), max_tokens=4)

    def chat_plain(self, prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
        body = {"model": self.shape.name, "messages": [{"role": "user", "content": prompt}]}
        return self.post("/v1/chat/completions", {**body, "max_tokens": max_tokens, **extra})
