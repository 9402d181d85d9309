"""The command line of ``openai-latency bench`` -> typed :class:`~.plan.BenchOptions`.

Bad input is a :class:`~..args.UsageError` (or argparse's one line), never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any, TextIO

from ... import args as arguments
from ...args import Parser, UsageError, duration
from ...stats.metric_table import SLO_METRICS, help_text
from ..lengths import IGNORE_EOS, parse_lengths, synthetic_prompt
from ..plan import BenchOptions, Load, Schedule, Slo, Target, Workload
from ..run import replay
from ..run.sweep import sweep_refusal
from ..workload import APIS, PrefixPolicy, parse_prefix_cache
from . import sources
from .client_options import add_client_options
from .result_options import TARGET, TARGET_HELP, add_result_options, check_baseline
from .sources import DEFAULT_REQUESTS

DEFAULT_PROMPT = "Explain in three sentences why the first token of an LLM response can be slow."
DEFAULT_MAX_TOKENS = 64
_TARGET = re.compile(r"^(?P<name>[^=\s]+)=(?P<url>https?://[^@\s]+?)(?:@(?P<model>\S+))?$")
METRICS_HELP = "what the numbers mean (docs/BENCH.md has the whole table):\n" + help_text(
    [("goodput", "share of requests that succeeded and met every --slo bound")]
)
DESCRIPTION = (
    "The same workload against several OpenAI-compatible endpoints or models, side by side: TTFT, TPOT,"
    " throughput, goodput, every phase of every request, retries and backoff, failures triaged."
)


def build_parser(out: TextIO | None = None, err: TextIO | None = None) -> Parser:
    parser = Parser(
        prog="openai-latency bench",
        out=out,
        err=err,
        description=DESCRIPTION,
        epilog=METRICS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_argument_group("targets")
    what.add_argument("--target", action="append", required=True, metavar=TARGET, help=TARGET_HELP)
    what.add_argument("--model", help="model for targets that do not name one")
    what.add_argument(
        "--api-key-env",
        action="append",
        metavar="NAME=VAR",
        help="API key variable per target (default OPENAI_API_KEY)",
    )
    work = parser.add_argument_group("workload")
    prompt = work.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="the user message (default: a short question)")
    prompt.add_argument("--prompt-file", metavar="FILE", help="the user message, from a file")
    prompt.add_argument(
        "--prompt-tokens",
        type=parse_lengths,
        metavar="N[:SD]|A,B",
        help="synthetic prompts of ~N tokens (N:STDEV normal, or a list: one length per request)",
    )
    prompt.add_argument(
        "--dataset",
        metavar="FILE",
        help="prompts from a file: JSONL of prompts or of chat messages, or ShareGPT JSON (cycled)",
    )
    prompt.add_argument(
        "--replay",
        metavar="FILE",
        help="the calls of an OTLP JSON file (their arrival times, token counts, stream flag; no content)",
    )
    work.add_argument(
        "--replay-speed",
        type=arguments.positive_float,
        metavar="X",
        help="--replay: X times as fast (default 1: the recorded spacing)",
    )
    work.add_argument(
        "--dataset-sample", type=arguments.count, metavar="N", help="--dataset: N items at random (--seed)"
    )
    work.add_argument(
        "--turns",
        type=arguments.count,
        default=1,
        metavar="K",
        help="conversations of K requests: each turn adds the answer and the next user message",
    )
    length = work.add_mutually_exclusive_group()
    length.add_argument("--max-tokens", type=arguments.count, metavar="K", help="default 64")
    length.add_argument(
        "--output-tokens",
        type=parse_lengths,
        metavar="M[:SD]|A,B",
        help="generate exactly M tokens: max_tokens M and ignore_eos (vLLM, SGLang, llama.cpp)",
    )
    work.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --output-tokens: send ignore_eos in the body (default on; off for servers that reject it)",
    )
    work.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True, help="default: stream")
    work.add_argument(
        "--stream-usage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for usage in the last chunk (stream_options.include_usage; default on)",
    )
    work.add_argument("--temperature", type=float, help="sampling temperature (default: the server's)")
    work.add_argument(
        "--reasoning-effort",
        metavar="LEVEL",
        help="reasoning_effort of every request (minimal, low, medium, high...: a reasoning model's effort)",
    )
    work.add_argument(
        "--extra-body",
        type=parse_extra_body,
        metavar="JSON",
        help="a JSON object merged into every request body (server-specific fields), e.g. '{\"top_k\": 20}'",
    )
    work.add_argument(
        "--api", choices=APIS, default="chat", help="chat (default), responses, completions, responses-ws"
    )
    work.add_argument(
        "--prefix-cache",
        type=parse_prefix_cache,
        default=PrefixPolicy(),
        metavar="cold|warm|shared:N",
        help=(
            "cold (default): a unique first line per request, so no request hits a prefix cache; warm:"
            " a priming request per prompt, then the same prompt; shared:N: N requests per prompt"
        ),
    )
    work.add_argument("--tools", metavar="FILE", help="tool definitions (a JSON list, chat shape)")
    work.add_argument(
        "--header", action="append", metavar="K=V", help="an HTTP header on every request (repeatable)"
    )
    load = parser.add_argument_group("load")
    load.add_argument(
        "-c",
        "--concurrency",
        type=arguments.count_list,
        metavar="C[,C...]",
        help="closed loop: requests in flight (a list runs a sweep); with --rate: the cap",
    )
    load.add_argument(
        "--rate", type=arguments.positive_float, metavar="R", help="open loop: requests/s per target"
    )
    load.add_argument("--poisson", action="store_true", help="with --rate: exponential inter-arrival gaps")
    amount = load.add_mutually_exclusive_group()
    amount.add_argument(
        "-n",
        "--requests",
        type=arguments.count,
        metavar="N",
        help=f"requests per target (default {DEFAULT_REQUESTS})",
    )
    amount.add_argument(
        "--duration", type=arguments.duration, metavar="S", help="run each load level this long"
    )
    load.add_argument(
        "--warmup",
        type=arguments.non_negative_count,
        default=0,
        metavar="W",
        help="requests per target before measuring (not in the results)",
    )
    load.add_argument(
        "--ramp-up",
        type=arguments.seconds_or_zero,
        metavar="S",
        help=(
            "closed loop: start the C workers evenly over S seconds (default: 5 ms per worker, at"
            " most 1 s, so the client does not set up C requests at one instant; 0: all at once)"
        ),
    )
    load.add_argument(
        "--sweep",
        type=arguments.count,
        nargs="?",
        const=5,
        metavar="N",
        help=(
            "find the highest throughput (closed loop, concurrency 1, 2, 4, ... until it stops growing),"
            " then N rates (default 5) from the lowest to it; the knee is marked"
        ),
    )
    load.add_argument(
        "--stop-over-saturated",
        action="store_true",
        help="--sweep: end a rate level once in-flight requests and TTFT grew for 1 s in a row",
    )
    load.add_argument(
        "--sequential", action="store_true", help="one target after another instead of interleaved"
    )
    load.add_argument("--seed", type=int, default=0, help="for --poisson and --prompt-tokens (default 0)")
    load.add_argument(
        "--workers",
        type=arguments.count,
        default=1,
        metavar="N",
        help=(
            "client processes sharing the load (default 1): one Python process parses every chunk it"
            " reads; at high concurrency give the client more cores"
        ),
    )
    add_client_options(parser.add_argument_group("client"))
    result = parser.add_argument_group("results")
    result.add_argument(
        "--slo",
        type=parse_slo,
        metavar="BOUNDS",
        help=f"goodput bounds, e.g. ttft=500ms,tpot=50ms,e2e=5s ({', '.join(SLO_METRICS)})",
    )
    result.add_argument(
        "--slow-threshold",
        type=arguments.duration,
        metavar="S",
        help="triage: slow successes take at least this long (default: the target's p95)",
    )
    add_result_options(result)
    result.add_argument(
        "--out", metavar="FILE", help="write every span as OTLP JSON lines (report rereads it)"
    )
    result.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="live progress on a terminal (default on)",
    )
    return parser


def options_from(namespace: argparse.Namespace) -> BenchOptions:
    """The parsed command line, checked and typed; :class:`UsageError` for what argparse cannot see."""
    opts = namespace
    key_envs = parse_key_envs(opts.api_key_env)
    targets = [parse_target(text, opts.model, key_envs) for text in opts.target]
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise UsageError(f"--target: names must differ, got {', '.join(names)}")
    check_baseline(opts.baseline, names, [load.label for load in _levels(opts)])
    if opts.poisson and opts.rate is None:
        raise UsageError("--poisson needs --rate")
    recorded = sources.replay_calls(opts)
    if opts.sweep is not None and (refusal := sweep_refusal(opts.concurrency, opts.rate, opts.workers)):
        raise UsageError(refusal)
    if opts.stop_over_saturated and opts.sweep is None:
        raise UsageError("--stop-over-saturated needs --sweep")
    return BenchOptions(
        targets=targets,
        workload=_workload(opts, recorded),
        schedule=Schedule(
            levels=[Load(1, replay_speed=opts.replay_speed or 1.0)] if recorded else _levels(opts),
            requests=len(recorded)
            if recorded
            else None
            if opts.duration is not None
            else (opts.requests or DEFAULT_REQUESTS),
            duration=opts.duration,
            warmup=opts.warmup,
            ramp_up=opts.ramp_up,
            sequential=opts.sequential,
            seed=opts.seed,
            workers=opts.workers,
            sweep=opts.sweep,
            stop_over_saturated=opts.stop_over_saturated,
        ),
        slo=opts.slo or Slo(),
        timeout=opts.timeout,
        max_retries=opts.max_retries,
        sdk_parse=opts.sdk_parse,
        slow_threshold=opts.slow_threshold,
        format=opts.format,
        headers=sources.parse_headers(opts.header),
        out=opts.out,
        progress=opts.progress,
        baseline=opts.baseline,
        html=opts.html,
    )


def _workload(opts: argparse.Namespace, recorded: list[replay.Recorded]) -> Workload:
    if opts.prompt_file:
        prompt = read_prompt(opts.prompt_file)
    elif opts.prompt_tokens:
        prompt = synthetic_prompt(opts.prompt_tokens.fixed or opts.prompt_tokens.mean, opts.seed)
    else:
        prompt = opts.prompt or DEFAULT_PROMPT
    if opts.tools and opts.api == "completions":
        raise UsageError("--tools: the completions API has no tools (use --api chat or responses)")
    output = opts.output_tokens
    return Workload(
        prompt,
        opts.max_tokens or (output.fixed or output.mean if output else DEFAULT_MAX_TOKENS),
        opts.stream,
        opts.temperature,
        opts.stream_usage,
        api=opts.api,
        prefix=opts.prefix_cache,
        tools=sources.read_tools(opts.tools) if opts.tools else (),
        conversations=sources.recorded_conversations(recorded, prompt, opts.seed)
        or sources.dataset_conversations(opts)
        or sources.synthetic_conversations(opts),
        turns=opts.turns,
        output_tokens=output,
        reasoning_effort=opts.reasoning_effort,
        # bench's own body fields, then the user's --extra-body over them (the user's value wins)
        extra_body={
            **(IGNORE_EOS if (output or recorded) and opts.ignore_eos else {}),
            **(opts.extra_body or {}),
        },
        replay_offsets=tuple(call.offset for call in recorded),
    )


def _levels(opts: argparse.Namespace) -> list[Load]:
    if opts.rate is None:
        return [Load(c) for c in (opts.concurrency or [1])]
    caps = opts.concurrency or [1000]
    return [Load(cap, opts.rate, opts.poisson) for cap in caps]


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


def parse_extra_body(text: str) -> dict[str, Any]:
    """``--extra-body``: a JSON object (what the SDK's ``extra_body`` merges into the request)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}: {text!r}")
    return value


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
