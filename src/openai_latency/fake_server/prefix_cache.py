"""``prompt-cache``: the fake's prefix cache, as a model server's KV cache behaves at the client.

A prompt is its words in order (the strings under ``content``/``text``/``input``, as
:func:`.payloads.count_words` counts them). The cache remembers prefixes of the prompts it saw, at
every :data:`BLOCK` words and at each prompt's end (vLLM caches in blocks of 16 tokens; a whole
earlier prompt is always a hit, so a conversation's next turn hits its previous prompt). A request's
cached tokens are the longest remembered prefix of its prompt (per model). Each word costs one
hash of a pair, which keeps the fake fast on long prompts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Final

#: Prefixes are remembered every BLOCK words (and at a prompt's end).
BLOCK: Final = 16
#: Prefixes kept, oldest dropped first.
MAX_PREFIXES: Final = 65536


def prompt_words(value: object) -> Iterator[str]:
    """The prompt's words, in order (a token id counts as one word, like ``count_words``)."""
    if isinstance(value, str):
        yield from value.split()
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, int):
                yield str(item)
            else:
                yield from prompt_words(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("content", "text", "input"):
                yield from prompt_words(item)


class PrefixCache:
    def __init__(self, block: int = BLOCK, limit: int = MAX_PREFIXES) -> None:
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._block = block
        self._limit = limit

    def lookup(self, model: str, prompt: object) -> int:
        """The words of the longest prefix of ``prompt`` seen before; remembers this prompt's."""
        seen = self._seen
        digest = hash(model)
        cached = count = 0
        keep: list[int] = []
        for word in prompt_words(prompt):
            digest = hash((digest, word))
            count += 1
            if digest in seen:
                cached = count
                seen.move_to_end(digest)
            elif count % self._block == 0:
                keep.append(digest)
        if count and digest not in seen:
            keep.append(digest)
        for item in keep:
            seen[item] = None
        while len(seen) > self._limit:
            seen.popitem(last=False)
        return cached

    def clear(self) -> None:
        self._seen.clear()
