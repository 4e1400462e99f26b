"""The Hopper GEMM's time per round of tiles, fitted from the K sweep (BM_Sm90KSweepF16 / BM_Sm90KSweepI8).

The persistent Hopper GEMM (include/llmk/gemm/hopper_gemm.cuh) runs min(tiles, SMs) blocks, each taking tiles
round-robin, so at M = N = 4096 every K has the same rounds = ceil(tiles / SMs), and

    time = rounds x (F + k_tiles x slope)          k_tiles = ceil(K / BK), BK = 128 bytes of K

a straight line in k_tiles per (type, BN). The 2026-11-25 H100 run fitted slope = 0.425 us for a 128 x 128 k-tile
(fp16 and int8 alike) and F = 4.4-7.5 us, from shapes that moved M, N and the tile together; the sweep moves K
alone. What the two numbers mean:
  - slope against the tile's operand bytes ((128 + BN) x 128 per k-tile, fetched from L2 by every active SM) and
    its tensor time (2 x 128 x BN x BK / (peak / SMs)): L2-bound, the slope grows 1.5x from BN = 128 to 256
    (the bytes); tensor-bound, 2x (the FLOPs). `l2_TBps` is the operand bandwidth the slope implies.
  - F: what a round costs besides its k-tiles (the epilogue, the pipeline's drain and refill, the launch).

    python3 -m bench.model.gemm_rounds bench/results/<folder>
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

FAMILIES = {"BM_Sm90KSweepF16": ("fp16", 2, "wgmma_f16"), "BM_Sm90KSweepI8": ("int8", 1, "wgmma_i8")}
SMS = 132


@dataclass(frozen=True)
class Fit:
    family: str
    bn: int
    points: int
    rounds: int
    f_us: float  # fixed cost per round
    slope_us: float  # per k-tile
    l2_tbps: float  # operand bytes of the active SMs per slope
    tensor_us: float  # a k-tile's tensor time at the peak (0 when no peak is given)
    worst_residual: float  # largest |measured - fitted| / measured


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def fit(points: list[tuple[int, int, int, float]], family: str, bn: int, peak_flops: float = 0.0,
        sms: int = SMS) -> Fit | None:
    """points: (M, N, K, seconds) of one family and width at one (M, N). None with fewer than 2 distinct K."""
    if len({p[2] for p in points}) < 2 or len({(p[0], p[1]) for p in points}) != 1:
        return None
    _name, elem, _kind = FAMILIES[family]
    bk = 128 // elem
    m, n = points[0][0], points[0][1]
    tiles = math.ceil(m / 128) * math.ceil(n / bn)
    rounds = math.ceil(tiles / sms)
    active = min(tiles, sms)
    xs = [float(math.ceil(k / bk)) for _m, _n, k, _t in points]
    ys = [t / rounds for *_rest, t in points]
    a, b = fit_line(xs, ys)
    worst = max(abs(rounds * (a + b * x) - t) / t for x, (*_r, t) in zip(xs, points))
    byts = (128 + bn) * 128.0
    tensor = 2.0 * 128 * bn * bk / (peak_flops / sms) if peak_flops > 0 else 0.0
    return Fit(family, bn, len(points), rounds, a * 1e6, b * 1e6, active * byts / b / 1e12 if b > 0 else 0.0,
               tensor * 1e6, worst)


def fits_of(entries, peaks: dict[str, float] | None = None) -> list[Fit]:
    """Fits per (family, BN, M, N) of a results folder's entries (bench.model.results.Entry)."""
    groups: dict[tuple[str, int, int, int], list] = {}
    for e in entries:
        base = e.parsed.base
        if base not in FAMILIES or e.time_s is None or not e.parsed.targs:
            continue
        a = e.parsed.args()
        bn = int(re.sub(r"\D", "", e.parsed.targs[0]) or 0)
        groups.setdefault((base, bn, a["M"], a["N"]), []).append((a["M"], a["N"], a["K"], e.time_s))
    out = []
    for (base, bn, _m, _n), pts in sorted(groups.items()):
        peak = (peaks or {}).get(FAMILIES[base][2], 0.0)
        f = fit(pts, base, bn, peak)
        if f is not None:
            out.append(f)
    return out


def lines(fits: list[Fit]) -> list[str]:
    if not fits:
        return []
    out = ["== Hopper GEMM per round (K sweep, bench/model/gemm_rounds.py): time = rounds x (F + k-tiles x slope)",
           f"   {'kernel':<18} {'BN':>4} {'rounds':>6} {'F us':>7} {'slope us':>9} {'tensor us':>9} "
           f"{'L2 TB/s':>8} {'fit err':>7}"]
    for f in fits:
        out.append(f"   {f.family:<18} {f.bn:>4} {f.rounds:>6} {f.f_us:>7.2f} {f.slope_us:>9.3f} "
                   f"{f.tensor_us:>9.3f} {f.l2_tbps:>8.2f} {100 * f.worst_residual:>6.1f}%")
    by = {(f.family, f.bn): f for f in fits}
    for fam in FAMILIES:
        lo, hi = by.get((fam, 128)), by.get((fam, 256))
        if lo and hi and lo.slope_us > 0:
            r = hi.slope_us / lo.slope_us
            verdict = "L2-bound (bytes: 1.5x)" if r < 1.75 else "tensor-bound (FLOPs: 2x)"
            out.append(f"   {fam}: slope 256 / 128 = {r:.2f}: {verdict}")
    return out


def main(argv=None) -> int:
    from . import hardware, results

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    a = ap.parse_args(argv)
    res = results.load(a.folder)
    gpu, _note = hardware.pick_gpu(res.meta.get("gpu"))
    peaks = {"wgmma_f16": gpu.tc_f16_dense, "wgmma_i8": gpu.tc_i8_dense} if gpu else None
    out = lines(fits_of(res.entries, peaks))
    print("\n".join(out) if out else "no BM_Sm90KSweep* entries with two or more K in this folder")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
