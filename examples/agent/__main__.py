"""``python -m examples.agent``: one agent turn against the fake server, then its breakdown."""

import sys

from .turn import main

sys.exit(main())
