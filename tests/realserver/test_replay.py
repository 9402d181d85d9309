"""``openai-latency bench --replay`` against a real server with a real tokenizer (llama.cpp's
SentencePiece-shaped one, :mod:`.tiny_model`): every replayed call gets exactly its recorded input and
output token counts, as the server's own usage reports them. In this vocabulary ``the`` is two tokens
(``▁th`` ``e``) and ``a`` one (``▁a``): the calibration must move on to ``a``; bench's first line is
byte tokens for its digits and hyphen, the same count whatever its value."""

from __future__ import annotations

from pathlib import Path

from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from tests.support.cli_runs import run_cli
from tests.support.otlp_files import recorded_calls_file

from .llama import LlamaServer

#: (seconds after the first, input tokens, output tokens, stream); within the 2,048-token context.
CALLS = [(0.0, 40, 3, True), (0.2, 257, 5, False), (0.5, 23, 4, True), (0.6, 1100, 2, True),
         (0.9, 96, 6, False), (1.2, 600, 7, True)]  # fmt: skip


def test_replay_reproduces_the_token_counts_on_a_real_tokenizer(llama: LlamaServer, tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    recording = recorded_calls_file(tmp_path, CALLS)
    result = run_cli(["bench", "--model", llama.shape.name, "--target", f"llama={llama.base_url}",
                      "--replay", str(recording), "--format", "json", "--out", str(out)])  # fmt: skip
    assert result.code == 0, result.err
    (entry,) = result.json()["results"]
    check = entry["input_tokens_as_recorded"]
    calibration = check["calibration"]
    assert calibration["exact"] is True and calibration["filler"] == "a", calibration
    assert calibration["measured"]["the"][1] - calibration["measured"]["the"][0] == 2 * (41 - 8)  # 2 a word
    assert (check["matched"], check["checked"], check["largest_miss"]) == (len(CALLS), len(CALLS), 0), check
    seen = sorted(
        (s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"])
        for s in read_spans([out], ReadStats())
        if s.name.startswith("chat ")
    )
    assert seen == sorted((i, o) for _, i, o, _ in CALLS)
    print(f"\nreplay on llama.cpp: {check}")
