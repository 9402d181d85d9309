"""Terminal output of the CLI: colour and a live progress display, with ``rich`` when installed.

``rich`` comes with the ``cli`` extra; the instrumentation never imports this module. Colour is off
when the stream is not a terminal or ``NO_COLOR`` is set (rich honours both); the progress display
only runs on a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

try:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text
except ImportError:  # the cli extra is not installed: plain text
    Console = None  # type: ignore[assignment,misc]


def color_enabled(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


class Output:
    """Lines to stdout; ``styled`` lines get a style only where colour is on."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._console = (
            Console(file=self.stream, highlight=False, soft_wrap=True)
            if Console is not None and color_enabled(self.stream)
            else None
        )

    def line(self, text: str = "", style: str | None = None) -> None:
        if self._console is not None and style:
            self._console.print(Text(text, style=style))
        else:
            self.stream.write(text + "\n")

    def lines(self, lines: list[str], style: str | None = None) -> None:
        for text in lines:
            self.line(text, style)

    def flush(self) -> None:
        self.stream.flush()


class Progress:
    """A live display on stderr, redrawn a few times a second from ``render()`` (a list of lines)."""

    def __init__(self, render: Callable[[], list[str]], enabled: bool, stream: TextIO | None = None) -> None:
        self._render = render
        self._stream = stream or sys.stderr
        self._enabled = enabled and bool(getattr(self._stream, "isatty", lambda: False)())
        self._live: Any = None

    def __enter__(self) -> Progress:
        if self._enabled and Console is not None:
            console = Console(file=self._stream, highlight=False)
            # redrawn by update() only: no refresh thread of its own competing with the event loop
            self._live = Live(self._text(), console=console, auto_refresh=False, transient=True)
            self._live.__enter__()
        return self

    def _text(self) -> Any:
        return Text("\n".join(self._render()))

    def update(self) -> None:
        if self._live is not None:
            self._live.update(self._text(), refresh=True)
        elif self._enabled:
            self._stream.write("\r" + " | ".join(self._render()) + "\x1b[K")
            self._stream.flush()

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        elif self._enabled:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
