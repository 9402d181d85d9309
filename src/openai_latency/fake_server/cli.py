"""``python -m openai_latency.fake_server`` (and ``openai-latency fake-server``): serve until a signal."""

from __future__ import annotations

import argparse
import signal
import ssl
import sys
import threading
from types import FrameType

from .script import SCRIPT_KEYS, ScriptError
from .server import FakeServer


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="OpenAI-compatible fake server with scripted latency. Every script key below is a "
        "server-wide default; a request overrides it with the header x-fake-<key>.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    parser.add_argument(
        "--port", type=int, default=8000, help="port, 0 for any free one (default: %(default)s)"
    )
    parser.add_argument(
        "--certfile",
        help="serve HTTPS with this PEM certificate chain (and HTTP/2 by ALPN if h2 is installed)",
    )
    parser.add_argument("--keyfile", help="private key for --certfile")
    script = parser.add_argument_group("script defaults")
    for key in SCRIPT_KEYS:
        script.add_argument(
            f"--{key}", dest=f"script:{key}", metavar="VALUE", help=f"default for x-fake-{key}"
        )
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog)
    args = vars(parser.parse_args(argv))
    defaults = {name[len("script:") :]: value for name, value in args.items() if name.startswith("script:")}
    context = None
    if args["certfile"]:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args["certfile"], args["keyfile"])
    try:
        server = FakeServer(args["host"], args["port"], ssl_context=context, defaults=defaults)
    except ScriptError as exc:
        parser.error(str(exc))
    stopped = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
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
