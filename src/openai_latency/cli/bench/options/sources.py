"""Where a bench workload's requests come from, as the command line says: recorded calls
(``--replay``), a dataset, synthetic prompts of varying lengths; and the request's extras
(``--header``, ``--tools``). :mod:`.options` calls these while it types the command line."""

from __future__ import annotations

import argparse
import json
import random
import re
from typing import Any

from ...args import UsageError
from ..lengths import PROMPT_POOL, synthetic_prompt
from ..run import replay
from ..workload import Conversation
from . import dataset

DEFAULT_REQUESTS = 20


def replay_calls(opts: argparse.Namespace) -> list[replay.Recorded]:
    if not opts.replay:
        if opts.replay_speed is not None:
            raise UsageError("--replay-speed needs --replay")
        return []
    given = [name for name in ("concurrency", "rate", "requests", "duration", "turns") if _given(opts, name)]
    if given:
        names = ", ".join(f"--{n}" for n in given)
        raise UsageError(f"--replay sends the recorded calls at their recorded times: leave out {names}")
    recorded, _skipped = replay.read(opts.replay)
    return recorded


def _given(opts: argparse.Namespace, name: str) -> bool:
    value = getattr(opts, name)
    return value is not None and not (name == "turns" and value == 1)


def recorded_conversations(
    recorded: list[replay.Recorded], prompt: str, seed: int
) -> tuple[Conversation, ...]:
    if not recorded:
        return ()
    return replay.conversations(recorded, lambda tokens: synthetic_prompt(tokens, seed), prompt)


def synthetic_conversations(opts: argparse.Namespace) -> tuple[Conversation, ...]:
    """Prompts whose lengths follow a ``--prompt-tokens`` distribution (none for one length)."""
    lengths = opts.prompt_tokens
    if lengths is None or lengths.fixed is not None:
        return ()
    rng = random.Random(opts.seed)
    count = PROMPT_POOL if opts.duration is not None else min(PROMPT_POOL, opts.requests or DEFAULT_REQUESTS)
    return tuple(
        Conversation(({"role": "user", "content": synthetic_prompt(lengths.draw(rng), opts.seed + i)},))
        for i in range(count)
    )


def dataset_conversations(opts: argparse.Namespace) -> tuple[Conversation, ...]:
    if not opts.dataset:
        if opts.dataset_sample is not None:
            raise UsageError("--dataset-sample needs --dataset")
        return ()
    limit = None if opts.duration is not None else (opts.requests or DEFAULT_REQUESTS) + opts.warmup
    return dataset.load(opts.dataset, opts.dataset_sample, opts.seed, limit)


def parse_headers(values: list[str] | None) -> dict[str, str]:
    """``--header K=V`` values -> a header dict (names as given)."""
    headers: dict[str, str] = {}
    for value in values or []:
        name, sep, text = value.partition("=")
        name = name.strip()
        if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
            raise UsageError(f"--header: expected NAME=VALUE with an HTTP header name, got {name or value!r}")
        headers[name] = text.strip()
    return headers


def read_tools(path: str) -> tuple[dict[str, Any], ...]:
    """``--tools FILE``: a JSON list of tool definitions (or ``{"tools": [...]}``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise UsageError(f"--tools: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--tools: {path} is not JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list) or not data or not all(isinstance(t, dict) and t.get("type") for t in data):
        raise UsageError(f"--tools: {path}: expected a non-empty JSON list of tool objects with a type")
    return tuple(data)
