"""``--replay``'s input lengths, exact where the target's tokenizer allows: calibrated per target.

A recorded call keeps its input token count, not its text, and bench has no tokenizer of the target
(none is downloaded). So it asks the target. Before the replay, per target, probe requests (warm-up:
not in the results; ``max_tokens`` 1, not streamed) send what the replay sends (bench's first line,
then ``k`` filler words; the same API, tools and body fields) for each ``k`` of :data:`PROBES`, and
read the input tokens of their usage: T(k) = a + b k, ``a`` being everything but the filler (the chat
template, the first line, the tools). A word that the target counts as exactly one token each (b = 1,
and the third probe on the line through the first two) makes every length exact: N - a words. The
words of :data:`FILLERS` are tried in order.

When the target counts none of them one token each (its tokenizer merges a repeated word, or splits
it), the calibration says so, and the prompts have (N - a) / b words of the first straight fit, or
plain words (~1.3 tokens each) without one: approximate. Either way every replayed call's input
tokens are checked afterwards against what the server reported (:class:`InputCheck`): the output
says how many matched exactly and the largest miss, never more than was checked.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..plan import Workload
from ..workload import Conversation, header, with_header
from .api import input_tokens, resource
from .record import TAG, Tag, tags

#: Filler words, tried in order: one token each in the usual tokenizers (cl100k, o200k, Llama's).
FILLERS = ("the", "a", "of", "is")
#: The filler words of the probes: two to fit the line, a third to check it (odd and even counts:
#: a tokenizer that merges pairs of a repeated word is not on a line).
PROBES = (8, 41, 104)

#: (filler word, words) -> the input tokens the target reported (None: no usage).
Probe = Callable[[str, int], Awaitable[int | None]]


@dataclass(frozen=True)
class Calibration:
    """What the probes found on one target."""

    #: The word the target counts as one token each (None: none was).
    filler: str | None = None
    #: Tokens of everything but the filler (a); with ``slope``, of the first straight fit.
    overhead: float | None = None
    #: Tokens per filler word of the first straight fit, when no word was one token each.
    slope: float | None = None
    word: str | None = None
    #: Per word tried, the input tokens the probes of :data:`PROBES` words got.
    measured: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: Why the lengths are not exact (None: they are).
    problem: str | None = None

    @property
    def exact(self) -> bool:
        return self.filler is not None

    def words(self, tokens: int) -> int | None:
        """Filler words for a prompt of ``tokens`` input tokens (None: no fit)."""
        if self.overhead is None:
            return None
        if self.filler is not None:
            return max(1, tokens - round(self.overhead))
        if self.slope:
            return max(1, round((tokens - self.overhead) / self.slope))
        return None

    def prompt(self, tokens: int) -> str | None:
        count, word = self.words(tokens), self.filler or self.word
        return None if count is None or word is None else " ".join([word] * count)

    @property
    def text(self) -> str:
        if self.filler is not None:
            return (
                f'calibrated: "{self.filler}" counted one token each, {self.overhead:g} tokens of'
                " template, first line and tools"
            )
        tried = "; ".join(
            f'"{w}" x {", ".join(map(str, PROBES))} -> {", ".join(map(str, t))} tokens'
            for w, t in self.measured
        )
        return f"not calibrated: {self.problem}" + (f" ({tried})" if tried else "") + ": lengths approximate"

    def as_dict(self) -> dict[str, Any]:
        return {
            "exact": self.exact,
            "filler": self.filler or self.word,
            "overhead_tokens": self.overhead,
            "tokens_per_filler": 1 if self.exact else self.slope,
            "probes": PROBES,
            "measured": {word: list(tokens) for word, tokens in self.measured},
            "problem": self.problem,
        }


async def calibrate(probe: Probe) -> Calibration:
    """The probes of :data:`FILLERS` in order, until a word is counted one token each."""
    measured: list[tuple[str, tuple[int, ...]]] = []
    fit: tuple[str, float, float] | None = None
    (k1, k2, k3) = PROBES
    for word in FILLERS:
        counts = []
        for words in PROBES:
            try:
                tokens = await probe(word, words)
            except Exception as exc:  # the SDK's: the endpoint refused the probe
                return Calibration(measured=tuple(measured), problem=f"a probe failed ({type(exc).__name__})")
            if tokens is None:
                problem = "the server reported no input tokens (usage)"
                return Calibration(measured=tuple(measured), problem=problem)
            counts.append(tokens)
        measured.append((word, tuple(counts)))
        t1, t2, t3 = counts
        straight = (t3 - t1) * (k2 - k1) == (t2 - t1) * (k3 - k1)
        if straight and t2 - t1 == k2 - k1:
            return Calibration(filler=word, overhead=t1 - k1, measured=tuple(measured))
        if straight and t2 > t1 and fit is None:
            slope = (t2 - t1) / (k2 - k1)
            fit = (word, t1 - slope * k1, slope)
    problem = f"the server counts none of {', '.join(FILLERS)} as one token each"
    if fit is None:
        return Calibration(measured=tuple(measured), problem=problem + ", nor any on a straight line")
    word, overhead, slope = fit
    return Calibration(overhead=overhead, slope=slope, word=word, measured=tuple(measured), problem=problem)


def replayed(conversations: Sequence[Conversation], calibration: Calibration) -> tuple[Conversation, ...]:
    """The replayed calls with prompts of the calibrated lengths (as they were without a fit)."""
    result = []
    for conversation in conversations:
        text = None if conversation.input_tokens is None else calibration.prompt(conversation.input_tokens)
        if text is not None:
            conversation = replace(conversation, messages=({"role": "user", "content": text},))
        result.append(conversation)
    return tuple(result)


def prober(client: Any, workload: Workload, model: str, target: str) -> Probe:
    """A probe on this target: its request as the replay sends it, with ``words`` filler words after
    a first line of bench's; warm-up (its spans are not kept)."""
    rng = random.Random()
    attributes = tags(target, "warmup", True)

    async def probe(word: str, words: int) -> int | None:
        messages = with_header([{"role": "user", "content": " ".join([word] * words)}], header(rng))
        kwargs = workload.create_kwargs(model, messages, 1, False)
        token = TAG.set(Tag(target, "warmup", True, attributes))
        try:
            return input_tokens(await resource(client, workload.api).create(**kwargs))
        finally:
            TAG.reset(token)

    return probe


@dataclass
class InputCheck:
    """A target's replayed calls: the input tokens the server reported against the recorded ones."""

    calibration: Calibration = field(default_factory=Calibration)
    matched: int = 0
    checked: int = 0
    #: Calls whose server reported no input tokens (not checked).
    unreported: int = 0
    #: Reported minus recorded, the largest in size (0: every checked call matched).
    largest_miss: int = 0

    def add(self, recorded: int, reported: int | None) -> None:
        if reported is None:
            self.unreported += 1
            return
        self.checked += 1
        miss = reported - recorded
        self.matched += miss == 0
        if abs(miss) > abs(self.largest_miss):
            self.largest_miss = miss

    def merge(self, other: InputCheck) -> None:
        """Another process's calls (``--workers``: each calibrated the same target on its own)."""
        self.matched += other.matched
        self.checked += other.checked
        self.unreported += other.unreported
        if abs(other.largest_miss) > abs(self.largest_miss):
            self.largest_miss = other.largest_miss
        if self.calibration.exact and not other.calibration.exact:
            self.calibration = other.calibration  # the worse one, said

    def line(self, label: str) -> str:
        text = f"{label}: replayed input tokens as recorded in {self.matched} of {self.checked} checked calls"
        text += (
            ", exactly"
            if self.checked and self.matched == self.checked
            else f", largest miss {self.largest_miss:+d}"
        )
        if self.unreported:
            text += f" ({self.unreported} calls without usage, not checked)"
        return f"{text}; {self.calibration.text}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "checked": self.checked,
            "unreported": self.unreported,
            "largest_miss": self.largest_miss,
            "calibration": self.calibration.as_dict(),
        }
