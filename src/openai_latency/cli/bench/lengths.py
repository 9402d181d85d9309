"""``--prompt-tokens`` and ``--output-tokens`` as distributions: ``N``, ``N:STDEV`` or ``A,B,C``.

``N:STDEV`` draws from a normal distribution (rounded, at least 1); a list draws its values with
equal chance; both from ``--seed``, so a run's lengths repeat. Prompt lengths are synthetic prompts
(:func:`synthetic_prompt`: plain words, about 1.3 tokens each); output lengths are each
request's ``max_tokens`` with an ignore-EOS hint (``ignore_eos``, which vLLM, SGLang and llama.cpp
accept in the request body: passed as ``extra_body``), so the server generates exactly that many.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

#: Distinct synthetic prompts made for a prompt-length distribution (cycled past that).
PROMPT_POOL = 4096
#: The body fields that ask a server not to stop at its end-of-sequence token.
IGNORE_EOS = {"ignore_eos": True}


@dataclass(frozen=True)
class Lengths:
    """A token-count distribution: ``mean`` with ``stdev``, or ``choices``."""

    mean: int = 0
    stdev: float = 0.0
    choices: tuple[int, ...] = ()

    @property
    def fixed(self) -> int | None:
        """The one value when there is no spread."""
        if self.choices:
            return self.choices[0] if len(set(self.choices)) == 1 else None
        return self.mean if self.stdev == 0 else None

    def draw(self, rng: random.Random) -> int:
        if self.choices:
            return rng.choice(self.choices)
        if self.stdev == 0:
            return self.mean
        return max(1, round(rng.gauss(self.mean, self.stdev)))

    @property
    def text(self) -> str:
        if self.choices:
            return ",".join(str(c) for c in self.choices)
        return f"{self.mean}:{self.stdev:g}" if self.stdev else str(self.mean)


def parse_lengths(text: str) -> Lengths:
    """``N``, ``N:STDEV`` or ``A,B,C`` (token counts >= 1) -> :class:`Lengths` (an argparse type)."""
    value = text.strip()
    try:
        if "," in value:
            choices = tuple(int(part) for part in value.split(",") if part.strip())
            if choices and min(choices) >= 1:
                return Lengths(choices=choices)
        else:
            mean, _, spread = value.partition(":")
            lengths = Lengths(int(mean), float(spread) if spread else 0.0)
            if lengths.mean >= 1 and 0 <= lengths.stdev < float("inf"):
                return lengths
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected N, N:STDEV or A,B,C with token counts >= 1, got {text!r}")


# A small vocabulary of common short words: about 1.3 tokens per word in OpenAI's tokenizers.
_WORDS = (
    "time", "network", "server", "model", "token", "queue", "first", "stream", "request", "answer",
    "reason", "latency", "cache", "prompt", "batch", "client", "slow", "fast", "wait", "phase", "call",
    "retry", "limit", "rate", "order", "value", "point", "data",
)  # fmt: skip
TOKENS_PER_WORD = 1.3


def synthetic_prompt(tokens: int, seed: int) -> str:
    """About ``tokens`` tokens of plain words (no tokenizer download): a reproducible word salad."""
    rng = random.Random(seed)
    words = max(1, round(tokens / TOKENS_PER_WORD))
    return " ".join(rng.choice(_WORDS) for _ in range(words))
