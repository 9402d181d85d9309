"""bench's SDK client: response models validated by pydantic, the SDK's own construction as the
fallback (``--sdk-parse``), on the real SDK."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from openai_latency.cli.bench.plan import Target
from openai_latency.cli.bench.run.clients import ValidatingAsyncOpenAI, clients_for
from openai_latency.cli.spans.collect import collect_calls
from openai_latency.cli.spans.files import read_spans
from openai_latency.cli.spans.span import ReadStats
from tests.support.cli_runs import by_target, run_cli, servers

CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "delta": {"content": "hi", "reasoning_content": "think"}, "finish_reason": None}
    ],
}


def _pair() -> tuple[Any, Any]:
    target = Target("t", "http://127.0.0.1:9/v1", "m", "OPENAI_LATENCY_TEST_NO_KEY")
    (validating,) = clients_for([target], 5.0, 0, sdk_parse="validate")
    (constructing,) = clients_for([target], 5.0, 0, sdk_parse="construct")
    return validating, constructing


def _parse(client: Any, data: object, cast_to: Any) -> Any:
    return client._process_response_data(data=data, cast_to=cast_to, response=None)


def test_the_validated_model_is_the_one_the_sdk_builds() -> None:
    validating, constructing = _pair()
    assert isinstance(validating, ValidatingAsyncOpenAI) and not isinstance(
        constructing, ValidatingAsyncOpenAI
    )
    fast, sdk = (
        _parse(validating, CHUNK, ChatCompletionChunk),
        _parse(constructing, CHUNK, ChatCompletionChunk),
    )
    assert type(fast) is type(sdk) is ChatCompletionChunk
    assert fast.model_dump() == sdk.model_dump()
    assert fast.choices[0].delta.model_extra == {"reasoning_content": "think"}  # extras kept alike
    assert validating._unvalidated == set()


def test_a_body_off_the_schema_is_built_the_sdks_way_from_then_on() -> None:
    validating, constructing = _pair()
    off = json.loads(json.dumps(CHUNK))
    del off["choices"][0]["index"], off["created"]  # required fields a loose server leaves out
    fast, sdk = _parse(validating, off, ChatCompletionChunk), _parse(constructing, off, ChatCompletionChunk)
    assert fast.model_dump() == sdk.model_dump()
    assert fast.choices[0].delta.content == "hi"
    assert validating._unvalidated == {ChatCompletionChunk}
    # the next body of that type goes straight to the SDK's construction, even a valid one
    again = _parse(validating, CHUNK, ChatCompletionChunk)
    assert again.model_dump() == _parse(constructing, CHUNK, ChatCompletionChunk).model_dump()


def test_what_is_not_a_model_is_left_to_the_sdk() -> None:
    validating, _ = _pair()
    assert _parse(validating, None, ChatCompletion) is None
    assert _parse(validating, {"a": 1}, object) == {"a": 1}
    assert validating._unvalidated == set()


THINKER = {"ttft-ms": 5, "reasoning-tokens": 6, "reasoning-delay-ms": 2, "chunks": 6, "chunk-delay-ms": 2}
OFF_SCHEMA = {"chunks": 6, "corrupt": "wrong-shape"}  # the first content chunk: valid JSON, wrong shape


@pytest.mark.parametrize("script", [THINKER, OFF_SCHEMA], ids=["reasoning", "off-schema"])
def test_bench_measures_the_same_streams_either_way(script: dict[str, object], tmp_path: Path) -> None:
    """Reasoning deltas (an extra field of the SDK's delta model) and a chunk off the schema (the
    fallback): bench's per-call facts are the same with the validator as with the SDK's default."""
    facts = {}
    with ExitStack() as stack:
        (server,) = servers(stack, script)
        for mode in ("validate", "construct"):
            out = tmp_path / f"{mode}.jsonl"
            result = run_cli(
                ["bench", "--target", f"a={server.base_url}", "--model", "o4-mini", "-n", "4", "-c", "2",
                 "--format", "json", "--sdk-parse", mode, "--out", str(out)]
            )  # fmt: skip
            assert result.code == 0, result.err
            assert by_target(json.loads(result.out))["a"]["errors"] == 0
            calls = collect_calls(read_spans([str(out)], ReadStats())).calls
            facts[mode] = sorted(
                (c.output_tokens, c.reasoning is not None, c.ttft is not None, c.error_type) for c in calls
            )
    assert len(facts["validate"]) == 4
    assert facts["validate"] == facts["construct"]
    if script is THINKER:
        assert all(reasoned for _, reasoned, _, _ in facts["validate"])
