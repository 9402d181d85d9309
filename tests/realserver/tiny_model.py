"""A tiny llama-architecture GGUF with random weights and a vocabulary built here (no download).

The vocabulary is SentencePiece-shaped (llama.cpp's ``llama`` tokenizer): ``<unk>``, ``<s>``,
``</s>``, the 256 byte tokens, ``▁``, the 26 letters, ``▁`` + a letter and ``▁`` + two letters.
A prompt of N two-letter words ("ab cd ef ...") is therefore exactly N tokens (plus ``<s>``), and
the chat template is the messages' contents joined, so a test knows its prompt's token count.

Generation never stops early: every token's embedding carries a constant in dimension 0, so the
final hidden state has a large positive component there, and the output rows of ``</s>``, the other
special tokens, the byte tokens and everything but the two-letter words have a large negative
weight on it: their logits sit far below the rest. The model writes " ab cd ..." words until
``max_tokens``, one token per stream chunk (no byte token holds back incomplete UTF-8).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

BOS, EOS, UNK = 1, 2, 0
WORD_MARK = "\u2581"
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


@dataclass(frozen=True)
class ModelShape:
    embedding: int = 384
    layers: int = 6
    feed_forward: int = 1536
    heads: int = 4
    context: int = 2048

    @property
    def name(self) -> str:
        return f"tiny-e{self.embedding}-l{self.layers}-f{self.feed_forward}"


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Pieces, scores (longer pieces merge first) and token types."""
    types = gguf.TokenType
    pieces = ["<unk>", "<s>", "</s>"]
    kinds = [types.UNKNOWN, types.CONTROL, types.CONTROL]
    pieces += [f"<0x{b:02X}>" for b in range(256)]
    kinds += [types.BYTE] * 256
    letters = string.ascii_lowercase
    words = [WORD_MARK, *letters, *(WORD_MARK + c for c in letters)]
    words += [WORD_MARK + a + b for a in letters for b in letters]
    pieces += words
    kinds += [types.NORMAL] * len(words)
    scores = [0.0] * 259 + [float(len(w)) for w in words]
    return pieces, scores, [int(k) for k in kinds]


def two_letter_word(i: int) -> str:
    letters = string.ascii_lowercase
    return letters[(i // 26) % 26] + letters[i % 26]


def prompt_of(tokens: int, salt: int = 0) -> str:
    """A prompt of exactly ``tokens`` word tokens (the server adds ``<s>``); ``salt`` makes
    another prompt of the same length (a different first word: no shared cached prefix)."""
    return " ".join(two_letter_word(i * 7 + salt * 131 + 1) for i in range(tokens))


def write_model(path: Path, shape: ModelShape, seed: int = 23) -> Path:
    """Writes the GGUF (f32 weights) to ``path``; returns it."""
    rng = np.random.default_rng(seed)
    pieces, scores, kinds = vocabulary()
    vocab = len(pieces)
    e, ff = shape.embedding, shape.feed_forward

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(shape.name)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(e)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(e // shape.heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores(scores)
    writer.add_token_types(kinds)
    writer.add_bos_token_id(BOS)
    writer.add_eos_token_id(EOS)
    writer.add_unk_token_id(UNK)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def rand(*dims: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(dims) * scale).astype(np.float32)

    embeddings = rand(vocab, e, scale=1.0)
    embeddings[:, 0] = 8.0  # the constant the output's ban rides on
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", np.ones(e, dtype=np.float32))
    output = rand(vocab, e, scale=0.05)
    output[:, 0] = 0.0
    first_word = 259 + 1 + 26 + 26  # the two-letter words: the only tokens the model may write
    output[:first_word, 0] = -50.0
    writer.add_tensor("output.weight", output)
    small = 0.02
    for i in range(shape.layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(e, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", rand(e, e, scale=small))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(e, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", rand(ff, e, scale=small))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", rand(ff, e, scale=small))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", rand(e, ff, scale=small))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    import sys

    out = write_model(Path(sys.argv[1]), ModelShape())
    print(out, out.stat().st_size)
