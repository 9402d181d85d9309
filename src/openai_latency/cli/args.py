"""Argument parsing shared by the commands: a usage error is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """``argparse`` that reports a bad option or value in one line (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(2)
