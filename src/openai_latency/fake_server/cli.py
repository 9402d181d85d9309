"""``python -m openai_latency.fake_server`` (and ``openai-latency fake-server``): serve until a signal."""

from __future__ import annotations

import argparse
import re
import signal
import ssl
import sys
import threading
from types import FrameType
from typing import NoReturn

from . import script as script_module
from .script import SCRIPT_KEYS, ScriptError
from .server import FakeServer
from .server_spans import SERVICE


def _plain(text: str) -> str:
    """reST markup off: ``code`` and :role:`target` become plain text."""
    return re.sub(r":\w+:`~?\.?([^`]*)`", r"\1", text).replace("``", "")


def script_help() -> str:
    """The script keys' table and notes (the docstring of :mod:`.script`), as plain text."""
    lines = []
    in_table = False
    for line in (script_module.__doc__ or "").splitlines():
        if line.startswith("===="):
            in_table = not in_table
            continue
        row = re.fullmatch(r"(\S.*?)(?:\s{2,}(.*))?|\s+(.*)", line) if in_table else None
        if row is None:
            lines.append(_plain(line))
            continue
        key, text, more = row.groups()
        lines.append(f"  {_plain(key):<24}{_plain(text or '')}" if key else f"{'':26}{_plain(more)}")
    return "\n".join(line.rstrip() for line in lines)


def key_docs() -> dict[str, str]:
    """Script key -> its description, from the table of :mod:`.script` (continuation lines joined)."""
    docs: dict[str, str] = {}
    in_table = False
    keys: list[str] = []
    for line in (script_module.__doc__ or "").splitlines():
        if line.startswith("===="):
            in_table = not in_table
            continue
        if not in_table:
            continue
        row = re.fullmatch(r"(\S.*?)(?:\s{2,}(.*))?", line)
        if row:  # a key (or several, comma-separated) and the start of its text
            named = re.findall(r"``([a-z0-9-]+)``", row.group(1))
            keys = named or keys
            for key in named:
                docs[key] = _plain(row.group(2) or "")
        else:
            for key in keys:
                docs[key] = (docs[key] + " " + _plain(line.strip())).strip()
    return docs


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {text!r}")
    return port


class _Parser(argparse.ArgumentParser):
    """Errors in one line, without the long usage (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="OpenAI-compatible fake server with scripted latency. Every script key below is a "
        "server-wide default; a request overrides it with the header x-fake-<key>.",
        epilog=script_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    parser.add_argument(
        "--port", type=_port, default=8418, help="port, 0 for any free one (default: %(default)s)"
    )
    parser.add_argument(
        "--certfile",
        help="serve HTTPS with this PEM certificate chain (and HTTP/2 by ALPN if h2 is installed)",
    )
    parser.add_argument("--keyfile", help="private key for --certfile")
    parser.add_argument(
        "--export-spans",
        metavar="DEST",
        help="export each request's own span as vLLM does (llm_request, gen_ai.latency.*, a child of"
        " the request's traceparent): to an OTLP/HTTP endpoint (http://host:4318) or a file (OTLP JSON"
        " lines); see the script key server-span-parent",
    )
    parser.add_argument(
        "--span-service", default=SERVICE, help="service.name of those spans (default: %(default)s)"
    )
    script = parser.add_argument_group("script defaults (a request's x-fake-<key> header overrides each)")
    docs = key_docs()
    for key in SCRIPT_KEYS:
        text = docs.get(key, "")
        script.add_argument(
            f"--{key}",
            dest=f"script:{key}",
            metavar="VALUE",
            help=f"x-fake-{key}: {text}".replace("%", "%%") if text else f"default for x-fake-{key}",
        )
    return parser


def _fail(parser: argparse.ArgumentParser, message: str) -> int:
    """A problem of the command line or the machine, in one line (exit status 2)."""
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog)
    args = vars(parser.parse_args(argv))
    defaults = {name[len("script:") :]: value for name, value in args.items() if name.startswith("script:")}
    context = None
    if args["keyfile"] and not args["certfile"]:
        return _fail(parser, "--keyfile needs --certfile")
    if args["certfile"]:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(args["certfile"], args["keyfile"])
        except FileNotFoundError as exc:
            return _fail(
                parser, f"cannot read the certificate or key: {exc.filename or args['certfile']}: not found"
            )
        except (OSError, ssl.SSLError) as exc:
            return _fail(parser, f"cannot load the certificate {args['certfile']}: {exc.strerror or exc}")
    try:
        server = FakeServer(
            args["host"],
            args["port"],
            ssl_context=context,
            defaults=defaults,
            export_spans=args["export_spans"],
            span_service=args["span_service"],
        )
    except ScriptError as exc:
        return _fail(parser, str(exc))
    try:
        server.start()
    except OSError as exc:  # the port in use, an address not on this machine, no permission
        reason = exc.strerror or str(exc)
        return _fail(parser, f"cannot listen on {args['host']}:{args['port']}: {reason}")
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"listening on {server.base_url}", flush=True)
        while not stopped.wait(1.0):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
