"""``tokenizer``: how the fake counts a prompt's tokens (usage ``prompt_tokens`` / ``input_tokens``).

- ``words`` (default): the words of the strings under ``content``/``text``/``input`` (a token id
  counts one): :func:`.payloads.count_words`.
- ``pieces``: a deterministic tokenizer shaped like the byte-pair tokenizers of real servers, with
  their pre-tokenizer's rules (cl100k's, Llama 3's) and a chat template's overhead, so that a client
  cannot get a prompt's count right by counting words. The text is cut into pieces: a run of letters
  with the space before it (``" the"``), one to three digits (``"123"``), one other character
  (``"-"``), a run of whitespace (``"\\n"``). A letter run counts one token per 4 letters, begun
  (``"the"`` 1, ``"latency"`` 2, ``"bench"`` 2); every other piece one. Each message (a dict with a
  ``role``) adds 3 tokens and a prompt with messages 3 more (the template around each message and
  the reply's start, OpenAI's documented count); a prompt without messages (a completions string)
  adds 1 (the begin-of-sequence token).
"""

from __future__ import annotations

import re
from typing import Final, Literal

Tokenizer = Literal["words", "pieces"]
TOKENIZERS: Final[tuple[str, ...]] = ("words", "pieces")

_PIECE: Final = re.compile(r" ?[^\W\d_]+|\d{1,3}|\s+|[^\s]", re.UNICODE)
#: Template tokens around each message, and around the whole prompt with messages.
PER_MESSAGE: Final = 3
PER_PROMPT: Final = 3
#: A prompt without messages: the begin-of-sequence token.
BOS: Final = 1


def text_pieces(text: str) -> int:
    """The tokens of one text under ``pieces`` (no template)."""
    tokens = 0
    for match in _PIECE.finditer(text):
        piece = match.group().lstrip(" ") or " "
        if piece[0].isalpha():
            tokens += (len(piece) + 3) // 4
        else:
            tokens += 1
    return tokens


def _walk(value: object) -> tuple[int, int]:
    """(tokens of the texts, messages) under ``value``."""
    if isinstance(value, str):
        return text_pieces(value), 0
    if isinstance(value, bool) or value is None:
        return 0, 0
    if isinstance(value, int):
        return 1, 0
    tokens = messages = 0
    if isinstance(value, list):
        for item in value:
            more, found = _walk(item)
            tokens, messages = tokens + more, messages + found
    elif isinstance(value, dict):
        if "role" in value:
            tokens, messages = tokens + PER_MESSAGE, messages + 1
        for key, item in value.items():
            if key in ("content", "text", "input"):
                more, found = _walk(item)
                tokens, messages = tokens + more, messages + found
    return tokens, messages


def pieces_tokens(prompt: object) -> int:
    """A prompt's tokens under ``pieces``: its texts and the template's tokens."""
    tokens, messages = _walk(prompt)
    return tokens + (PER_PROMPT if messages else BOS)
