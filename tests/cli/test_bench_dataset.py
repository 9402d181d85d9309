"""``--dataset`` files read without a server: formats, sampling, and large files read item by item."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openai_latency.cli.args import UsageError
from openai_latency.cli.bench.options import dataset


def _write(path: Path, items: list[object], array: bool) -> str:
    path.write_text(json.dumps(items, indent=1) if array else "\n".join(json.dumps(i) for i in items))
    return str(path)


@pytest.mark.parametrize("array", [False, True])
def test_a_sample_is_n_items_of_the_file_chosen_by_the_seed(tmp_path: Path, array: bool) -> None:
    path = _write(tmp_path / "d", [f"prompt {i}" for i in range(50)], array)
    sample = dataset.load(path, 5, 7, None)
    texts = [c.messages[0]["content"] for c in sample]
    assert len(set(texts)) == 5 and all(t.startswith("prompt ") for t in texts)
    assert texts == sorted(texts, key=lambda t: int(t.split()[1]))  # the file's order
    assert dataset.load(path, 5, 7, None) == sample  # the same seed, the same sample
    assert [c.messages[0]["content"] for c in dataset.load(path, 5, 8, None)] != texts
    assert len(dataset.load(path, None, 0, None)) == 50


def test_a_large_file_is_read_item_by_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the streaming size (lowered here): the first ``limit`` items, a sample, or an error."""
    items = [{"conversations": [{"from": "human", "value": f"q{i} " + "x" * 300}]} for i in range(400)]
    path = _write(tmp_path / "big.json", items, array=True)
    monkeypatch.setattr(dataset, "STREAM_BYTES", 10_000)
    monkeypatch.setattr(dataset, "_READ", 512)  # the array reader crosses many read boundaries
    first = dataset.load(path, None, 0, 3)
    assert [c.messages[0]["content"].split()[0] for c in first] == ["q0", "q1", "q2"]
    assert len(dataset.load(path, 10, 0, None)) == 10
    with pytest.raises(UsageError, match="over 100 MB: give --dataset-sample"):
        dataset.load(path, None, 0, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"nothing": 1}\n', "item 1: expected a prompt string"),
        ('"ok"\n{not json\n', "line 2: not JSON"),
        ("[1, 2", "item 1: expected"),
        ('[{"conversations": [{"from": "gpt", "value": "a"}]}]', "without a human turn"),
        ("", "has no items"),
    ],
)
def test_bad_datasets_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        dataset.load(str(path), None, 0, None)
