"""A :class:`~..stats.verdict.Verdict` as sentences, a table and JSON.

One sentence per metric that differs ("slow vs fast, time to first token: p50 equal (+0.3 ms
[-0.4..1.1]), p95 812 ms slower [600..1100], because of retry_backoff (+780 ms per call near p95):
8 of 40 calls waited on backoff after RateLimitError (4.1 s)"), or "no difference detectable with N
requests" when nothing does. Intervals are 95 % bootstrap intervals (``stats/bootstrap.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..stats.bootstrap import CONFIDENCE, RESAMPLES, SEED
from ..stats.metric_table import METRICS
from ..stats.verdict import (
    MIN_EFFECT_S,
    MIN_EFFECT_SHARE,
    Estimate,
    MetricVerdict,
    PhaseShift,
    Side,
    Verdict,
)
from .tables import Rows

WORDS = {**{metric.name: metric.title for metric in METRICS}, "error_rate": "error rate"}
#: A phase explains a difference when it moved the same way by at least this share of it...
EXPLAINS = 0.2
#: ... and goes the other way when it moved against it by at least this share (and MIN_EFFECT_S).
AGAINST = 0.1


def ms(seconds: float, signed: bool = False) -> str:
    """Milliseconds, to what the clock and the noise resolve: ``812 ms``, ``3.4 ms``, ``0.25 ms``."""
    value = seconds * 1000
    size = abs(value)
    digits = 0 if size >= 100 else 1 if size >= 1 else 2
    if round(value, digits) == 0:
        value = 0.0
    text = f"{value:+.{digits}f}" if signed and value else f"{value:.{digits}f}"
    return text.replace("-", "\u2212") + " ms"


def _bounds(low: float, high: float, signed: bool) -> str:
    if signed:
        return f"[{ms(low, True)[:-3]}..{ms(high, True)[:-3]}]"
    low, high = sorted((abs(low), abs(high)))
    return f"[{ms(low)[:-3]}..{ms(high)[:-3]}]"


def _pp(value: float, signed: bool = False) -> str:
    return (f"{value * 100:+.1f}" if signed else f"{abs(value) * 100:.1f}").replace("-", "\u2212")


def estimate_text(estimate: Estimate) -> str:
    """``p95 812 ms slower [600..1100] (x2.5)`` or ``p50 equal (+0.3 ms [-0.4..1.1])``."""
    interval = estimate.interval
    if not estimate.significant:
        bounds = _bounds(interval.low, interval.high, signed=True)
        floor = max(MIN_EFFECT_S, MIN_EFFECT_SHARE * abs(estimate.baseline))
        word = "equal" if abs(interval.estimate) < floor else "no difference detectable"
        return f"{estimate.stat} {word} ({ms(interval.estimate, True)} {bounds})"
    way = "slower" if interval.estimate > 0 else "faster"
    ratio = f" (x{estimate.ratio:.2f})" if estimate.ratio is not None else ""
    bounds = _bounds(interval.low, interval.high, signed=False)
    return f"{estimate.stat} {ms(abs(interval.estimate))} {way} {bounds}{ratio}"


def _explained(estimate: Estimate, verdict: Verdict) -> str:
    change = estimate.difference
    near = f"per call near {estimate.stat}"
    same = [s for s in estimate.phases if s.change * change > 0 and abs(s.change) >= EXPLAINS * abs(change)]
    other = [
        s
        for s in estimate.phases
        if s.change * change < 0 and abs(s.change) >= max(MIN_EFFECT_S, AGAINST * abs(change))
    ]
    text = ""
    if same:
        text += ", because of " + ", ".join(f"{s.phase} ({ms(s.change, True)} {near})" for s in same[:2])
        if any(s.phase == "retry_backoff" for s in same):
            text += _backoff(verdict.current if change > 0 else verdict.baseline)
    if other:
        text += "; the other way: " + ", ".join(f"{s.phase} ({ms(s.change, True)})" for s in other[:2])
    return text


def _backoff(side: Side) -> str:
    if not side.backoff_calls:
        return ""
    reasons = " or ".join(list(side.retry_reasons)[:2]) or "a failed attempt"
    return (
        f": {side.backoff_calls} of {side.calls} calls on {side.label} waited on backoff after {reasons}"
        f" ({ms(side.backoff_s) if side.backoff_s < 1 else f'{side.backoff_s:.1f} s'})"
    )


def metric_sentence(verdict: Verdict, metric: MetricVerdict) -> str:
    head = f"{verdict.current.label} vs {verdict.baseline.label}, {WORDS[metric.metric]}: "
    if metric.metric == "error_rate":
        (e,) = metric.estimates
        way = "higher" if e.difference > 0 else "lower"
        errors = ", ".join(f"{name} {count}" for name, count in verdict.current.errors.items())
        return (
            head + f"{_pp(e.difference)} pp {way} {_pp_bounds(e)} ({_pp(e.current)} % vs {_pp(e.baseline)} %)"
            + (f"; {verdict.current.label}'s errors: {errors}" if errors else "") + "."
        )  # fmt: skip
    text = head + ", ".join(estimate_text(e) for e in metric.estimates)
    strongest = max((e for e in metric.estimates if e.significant), key=lambda e: abs(e.difference))
    return text + _explained(strongest, verdict) + "."


def _pp_bounds(estimate: Estimate) -> str:
    low, high = sorted((abs(estimate.interval.low), abs(estimate.interval.high)))
    return f"[{_pp(low)}..{_pp(high)}]"


def sentences(verdict: Verdict) -> list[str]:
    """The verdict in words: one sentence per metric that differs, else "no difference detectable"."""
    if not verdict.metrics or all(not m.estimates for m in verdict.metrics):
        return [
            f"{verdict.current.label} vs {verdict.baseline.label}: too few calls to compare"
            f" ({verdict.current.calls} and {verdict.baseline.calls})."
        ]
    if not verdict.significant:
        compared = ", ".join(WORDS[m.metric] for m in verdict.metrics if m.estimates)
        return [
            f"{verdict.current.label} vs {verdict.baseline.label}: no difference detectable with"
            f" {verdict.current.calls} and {verdict.baseline.calls} requests ({compared}; p50 and p95,"
            f" {CONFIDENCE:.0%} bootstrap intervals)."
        ]
    lines = [metric_sentence(verdict, m) for m in verdict.metrics if m.significant]
    same = [WORDS[m.metric] for m in verdict.metrics if m.estimates and not m.significant]
    if same:
        lines.append(f"No difference detectable in {', '.join(same)}.")
    return lines


def verdict_rows(verdicts: Sequence[Verdict]) -> Rows:
    """One row per (pair, metric, statistic): both values, the difference and its interval."""
    rows: Rows = [["verdict", "metric", "baseline", "current", "difference [95% CI]", "ratio", ""]]
    for verdict in verdicts:
        pair = f"{verdict.current.label} vs {verdict.baseline.label}"
        for metric in verdict.metrics:
            for e in metric.estimates:
                rows.append([pair, f"{metric.metric} {e.stat}", *_cells(metric.metric, e)])
                pair = ""
    return rows


def _cells(metric: str, e: Estimate) -> list[str]:
    i = e.interval
    if metric == "error_rate":
        values = [
            f"{_pp(e.baseline)}%",
            f"{_pp(e.current)}%",
            f"{_pp(i.estimate, True)} pp [{_pp(i.low, True)}..{_pp(i.high, True)}]",
        ]
    else:
        values = [ms(e.baseline), ms(e.current), f"{ms(i.estimate, True)} {_bounds(i.low, i.high, True)}"]
    ratio = f"x{e.ratio:.2f}" if e.ratio is not None and e.significant else "-"
    return [*values, ratio, "differs" if e.significant else "same"]


def method() -> str:
    """How the intervals were made, in one line (for the text and the JSON)."""
    return (
        f"{CONFIDENCE:.0%} percentile-bootstrap intervals, {RESAMPLES} resamples per side, seed {SEED};"
        f" a difference counts when its interval excludes 0 and it is at least {MIN_EFFECT_S * 1000:g} ms"
        f" and {MIN_EFFECT_SHARE:.0%} of the baseline"
    )


def _shift(s: PhaseShift) -> dict[str, Any]:
    return {"phase": s.phase, "baseline_s": s.baseline, "current_s": s.current, "change_s": s.change}


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    def side(s: Side) -> dict[str, Any]:
        return {
            "label": s.label, "calls": s.calls, "backoff_calls": s.backoff_calls, "backoff_s": s.backoff_s,
            "retry_reasons": s.retry_reasons, "errors": s.errors,
        }  # fmt: skip

    metrics = {}
    for m in verdict.metrics:
        metrics[m.metric] = {
            "calls": {"baseline": m.calls[0], "current": m.calls[1]},
            "significant": m.significant,
            **{
                e.stat: {
                    "baseline": e.baseline,
                    "current": e.current,
                    "difference": e.difference,
                    "ci_low": e.interval.low,
                    "ci_high": e.interval.high,
                    "significant": e.significant,
                    "ratio": e.ratio,
                    "phases": [_shift(s) for s in e.phases],
                }
                for e in m.estimates
            },
        }
    return {
        "baseline": side(verdict.baseline),
        "current": side(verdict.current),
        "significant": verdict.significant,
        "sentences": sentences(verdict),
        "metrics": metrics,
    }


def method_json() -> dict[str, Any]:
    return {
        "method": "percentile bootstrap, each side resampled on its own",
        "confidence": CONFIDENCE,
        "resamples": RESAMPLES,
        "seed": SEED,
        "min_effect_s": MIN_EFFECT_S,
        "min_effect_share": MIN_EFFECT_SHARE,
    }
