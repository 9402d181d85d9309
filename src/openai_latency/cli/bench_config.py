"""What ``openai-latency bench`` runs: targets, the workload and the load, parsed from the command line."""

from __future__ import annotations

import argparse
import os
import random
import re
from dataclasses import dataclass, field
from typing import Any

from .args import UsageError, duration

#: The SLO bounds ``--slo`` accepts: metric name -> what it bounds.
SLO_METRICS = {
    "ttft": "time to first token",
    "ttfc": "time to first chunk",
    "tpot": "time per output token",
    "e2e": "request duration",
}
DEFAULT_PROMPT = "Explain in three sentences why the first token of an LLM response can be slow."
_TARGET = re.compile(r"^(?P<name>[^=\s]+)=(?P<url>https?://[^@\s]+?)(?:@(?P<model>\S+))?$")
# A small vocabulary of common short words: about 1.3 tokens per word in OpenAI's tokenizers.
_WORDS = (
    "time", "network", "server", "model", "token", "queue", "first", "stream", "request", "answer",
    "reason", "latency", "cache", "prompt", "batch", "client", "slow", "fast", "wait", "phase", "call",
    "retry", "limit", "rate", "order", "value", "point", "data",
)  # fmt: skip
TOKENS_PER_WORD = 1.3
#: The default ``--ramp-up``: 5 ms per closed-loop worker, at most 1 s. Setting up a streamed request
#: through the SDK takes the client 1-3 ms of CPU, so C workers started at one instant delay the
#: last one's TTFT by C times that (+190 ms on every request of the first round at -c 64, measured).
RAMP_PER_WORKER_S = 0.005
RAMP_MAX_S = 1.0


@dataclass(frozen=True)
class Target:
    name: str
    base_url: str
    model: str
    #: The environment variable that holds the API key (the key itself is never stored here).
    api_key_env: str

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


@dataclass(frozen=True)
class Workload:
    prompt: str
    max_tokens: int
    stream: bool
    temperature: float | None
    #: Ask for usage in the last chunk (``stream_options.include_usage``).
    stream_usage: bool

    def create_kwargs(self, model: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
        }
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.stream:
            kwargs["stream"] = True
            if self.stream_usage:
                kwargs["stream_options"] = {"include_usage": True}
        return kwargs


@dataclass(frozen=True)
class Load:
    """One load level: a closed loop of ``concurrency`` workers, or arrivals at ``rate`` per target."""

    concurrency: int
    rate: float | None = None
    poisson: bool = False

    def ramp(self, ramp_up: float | None) -> float:
        """Seconds over which the closed loop starts its workers (``--ramp-up``; open loop: 0)."""
        if self.rate is not None:
            return 0.0
        if ramp_up is not None:
            return ramp_up
        return min(RAMP_PER_WORKER_S * self.concurrency, RAMP_MAX_S)

    @property
    def label(self) -> str:
        if self.rate is None:
            return f"c={self.concurrency}"
        kind = "poisson" if self.poisson else "rate"
        return f"{kind}={self.rate:g}/s c<={self.concurrency}"


@dataclass(frozen=True)
class Plan:
    """One bench invocation: its options and what they resolved to."""

    opts: argparse.Namespace
    targets: list[Target]
    workload: Workload
    loads: list[Load]
    #: Targets left out because they refused connections, with the reason.
    unreachable: dict[Target, str]


@dataclass(frozen=True)
class Slo:
    bounds: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.bounds)

    @property
    def text(self) -> str:
        return ",".join(f"{name}={seconds * 1000:g}ms" for name, seconds in self.bounds.items())


def parse_target(text: str, default_model: str | None, key_envs: dict[str, str]) -> Target:
    match = _TARGET.match(text.strip())
    if not match:
        raise UsageError(
            f"--target: expected NAME=BASE_URL or NAME=BASE_URL@MODEL (http or https), got {text!r}"
        )
    model = match.group("model") or default_model
    name = match.group("name")
    if not model:
        raise UsageError(f"--target {name}: no model (give --model M or {name}=BASE_URL@MODEL)")
    return Target(name, match.group("url").rstrip("/"), model, key_envs.get(name, "OPENAI_API_KEY"))


def parse_key_envs(values: list[str] | None) -> dict[str, str]:
    result: dict[str, str] = {}
    for value in values or []:
        name, sep, var = value.partition("=")
        if not sep or not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            raise UsageError(f"--api-key-env: expected NAME=ENV_VAR, got {value!r}")
        if var not in os.environ:
            raise UsageError(f"--api-key-env {name}: the environment variable {var} is not set")
        result[name] = var
    return result


def parse_slo(text: str) -> Slo:
    """``ttft=500ms,tpot=50ms,e2e=5s`` -> bounds in seconds (a bare number is milliseconds)."""
    bounds: dict[str, float] = {}
    for part in (item.strip() for item in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep or name not in SLO_METRICS:
            raise argparse.ArgumentTypeError(
                f"expected NAME=DURATION with NAME one of {', '.join(SLO_METRICS)}, got {part!r}"
            )
        try:
            bounds[name] = duration(value, default_unit="ms")
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{name}: {exc}") from None
    if not bounds:
        raise argparse.ArgumentTypeError(f"no bounds in {text!r}")
    return Slo(bounds)


def synthetic_prompt(tokens: int, seed: int) -> str:
    """About ``tokens`` tokens of plain words (no tokenizer download): a reproducible word salad."""
    rng = random.Random(seed)
    words = max(1, round(tokens / TOKENS_PER_WORD))
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def read_prompt(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UsageError(f"--prompt-file: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--prompt-file: {path} is not UTF-8 text") from None
    if not text.strip():
        raise UsageError(f"--prompt-file: {path} is empty")
    return text
