"""The command line of ``openai-latency bench``: options -> targets, workload, load levels."""

from __future__ import annotations

import argparse

from . import args as arguments
from .args import Parser
from .bench_config import (
    DEFAULT_PROMPT,
    SLO_METRICS,
    Load,
    Workload,
    parse_slo,
    read_prompt,
    synthetic_prompt,
)

DESCRIPTION = (
    "The same workload against several OpenAI-compatible endpoints or models, side by side: TTFT, TPOT,"
    " throughput, goodput, every phase of every request, retries and backoff, failures triaged."
)


def build_parser() -> Parser:
    parser = Parser(
        prog="openai-latency bench",
        description=DESCRIPTION,
        epilog="Metric definitions: see README ('Benchmarking endpoints').",
    )
    what = parser.add_argument_group("targets")
    what.add_argument("--target", action="append", required=True, metavar="NAME=BASE_URL[@MODEL]")
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
        "--prompt-tokens", type=arguments.count, metavar="N", help="a synthetic prompt of ~N tokens"
    )
    work.add_argument("--max-tokens", type=arguments.count, default=64, metavar="K", help="default 64")
    work.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True, help="default: stream")
    work.add_argument(
        "--stream-usage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for usage in the last chunk (stream_options.include_usage; default on)",
    )
    work.add_argument("--temperature", type=float)
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
        "-n", "--requests", type=arguments.count, metavar="N", help="requests per target (default 20)"
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
    client = parser.add_argument_group("client")
    client.add_argument("--timeout", type=arguments.duration, default=60.0, metavar="S", help="default 60 s")
    client.add_argument(
        "--max-retries", type=arguments.non_negative_count, default=2, help="SDK retries (default 2)"
    )
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
    result.add_argument("--format", choices=("table", "json", "markdown", "csv"), default="table")
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


def workload_from(opts: argparse.Namespace) -> Workload:
    if opts.prompt_file:
        prompt = read_prompt(opts.prompt_file)
    elif opts.prompt_tokens:
        prompt = synthetic_prompt(opts.prompt_tokens, opts.seed)
    else:
        prompt = opts.prompt or DEFAULT_PROMPT
    return Workload(prompt, opts.max_tokens, opts.stream, opts.temperature, opts.stream_usage)


def loads_from(opts: argparse.Namespace) -> list[Load]:
    if opts.requests is None and opts.duration is None:
        opts.requests = 20
    if opts.rate is None:
        return [Load(c) for c in (opts.concurrency or [1])]
    caps = opts.concurrency or [1000]
    return [Load(cap, opts.rate, opts.poisson) for cap in caps]
