"""Number formatting shared by the printed tables (ASCII only: 'us', not the micro sign)."""
from __future__ import annotations

TIME_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_ratio(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}x"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100.0 * x:.0f}%"


def fmt_rate(flops_per_s: float | None, bytes_per_s: float | None, bound: str) -> str:
    """Achieved throughput in the unit of the binding resource: TFLOP/s or GB/s."""
    if bound == "memory" and bytes_per_s:
        return f"{bytes_per_s / 1e9:.0f} GB/s"
    if flops_per_s:
        return f"{flops_per_s / 1e12:.1f} TFLOP/s"
    return "n/a"


def fmt_count(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> list[str]:
    """Fixed-width text table: header, rule, rows (columns in `right` right-aligned)."""
    right = right or set()
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(headers).rstrip(), "  ".join("-" * w for w in widths)] + [line(r).rstrip() for r in rows]
