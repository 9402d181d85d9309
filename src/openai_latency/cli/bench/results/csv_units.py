"""The unit and the rounding of each value of ``bench --format csv``: seconds to the microsecond (what
the clock resolves), rates to 0.001, counts as they are."""

from __future__ import annotations

#: Metric (or its last part) -> unit, for what is not a duration in seconds.
_UNITS = {
    "tokens_per_s": "tokens/s", "throughput_tokens_per_s": "tokens/s", "requests_per_s": "requests/s",
    "error_rate": "ratio", "goodput": "ratio", "cpu_per_request_s": "s", "backoff_s": "s",
}  # fmt: skip
#: Decimals kept per unit: seconds to the microsecond (what the clock resolves), rates to 0.001.
_DECIMALS = {"s": 6, "ratio": 6, "tokens/s": 3, "requests/s": 3}


_QUANTILES = ("p50", "p95", "p99", "min", "max", "mean")


def csv_unit(metric: str, statistic: str) -> str:
    """The unit of one CSV value: ``s``, ``ratio``, ``tokens/s``, ``requests/s`` or ``count``."""
    if statistic == "n":
        return "count"
    if statistic == "share":
        return "ratio"
    base = metric.split(".")[0]
    if base in _UNITS:
        return _UNITS[base]
    if statistic in _QUANTILES:
        return "s"
    parts = metric.split(".")
    if any(part.endswith("_s") or part.rpartition("_")[2] in _QUANTILES for part in parts):
        return "s"  # prompt_cache.prefill_phases_p50.http.server_wait, ...
    return "count"


def csv_value(value: float | int | None, unit: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):  # nothing finer than the clock's microsecond, whatever the unit
        decimals = _DECIMALS.get(unit, 6)
        return f"{round(value, decimals):.{decimals}f}".rstrip("0").rstrip(".") or "0"
    return repr(value)
