"""A group's triage (:mod:`..stats.triage`) as a short text section."""

from __future__ import annotations

from ..stats.triage import Bucket


def triage_lines(buckets: dict[str, Bucket], calls: int, indent: str = "  ") -> list[str]:
    """A short text section: one line per bucket with counts, kinds and example ids."""
    if not buckets:
        return [f"{indent}triage: no failed, rate-limited or slow calls"]
    lines = [f"{indent}triage:"]
    for bucket in buckets.values():
        kinds = ", ".join(f"{kind} {count}" for kind, count in bucket.kinds.most_common(4))
        text = f"{indent}  {bucket.title}: {bucket.calls} of {calls} ({bucket.meaning})"
        if kinds:
            text += f"; {'dominant phase' if bucket.name == 'slow_success' else 'kinds'}: {kinds}"
        if bucket.retries:
            text += f"; {bucket.retries} retries, {bucket.backoff_s * 1000:.0f} ms backoff"
        lines.append(text)
        lines.append(f"{indent}    e.g. {', '.join(bucket.examples)}")
    return lines
