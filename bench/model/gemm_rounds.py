"""The Hopper GEMM's time per round of tiles, fitted from the K sweep (BM_Sm90KSweepF16 / I8<BN, Cm[, Pp]>).

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
  - Cm = 2 (clusters of 2 blocks along M, B multicast: Sm90ClusterGemmConfig): each block fetches (128 + BN / 2)
    x 128 bytes a k-tile; if L2 bounds the slope, it falls in proportion (0.75x at BN = 128, 0.67x at 256).
  - Pp = 1 (ping-pong consumers: Sm90PingPongGemmConfig, BN = 128): each consumer warpgroup owns whole tiles
    and the two alternate, one's epilogue under the other's k-loop, so the part of F that is the epilogue
    (tensor cores idle while every SM stores its tile) should vanish; same operand bytes per k-tile, so the
    same slope if L2 bounds it.

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
    cm: int  # blocks per cluster (1: none)
    points: int
    rounds: int
    f_us: float  # fixed cost per round
    slope_us: float  # per k-tile
    l2_tbps: float  # operand bytes of the active SMs per slope
    tensor_us: float  # a k-tile's tensor time at the peak (0 when no peak is given)
    worst_residual: float  # largest |measured - fitted| / measured
    pp: int = 0  # 1: ping-pong consumers


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def fit(points: list[tuple[int, int, int, float]], family: str, bn: int, peak_flops: float = 0.0,
        sms: int = SMS, cm: int = 1, pp: int = 0) -> Fit | None:
    """points: (M, N, K, seconds) of one family and width at one (M, N). None with fewer than 2 distinct K."""
    if len({p[2] for p in points}) < 2 or len({(p[0], p[1]) for p in points}) != 1:
        return None
    _name, elem, _kind = FAMILIES[family]
    bk = 128 // elem
    m, n = points[0][0], points[0][1]
    units = math.ceil(math.ceil(m / 128) / cm) * math.ceil(n / bn)  # tiles, or pairs of tiles in clusters
    rounds = math.ceil(units / (sms // cm))
    active = min(units, sms // cm) * cm
    xs = [float(math.ceil(k / bk)) for _m, _n, k, _t in points]
    ys = [t / rounds for *_rest, t in points]
    a, b = fit_line(xs, ys)
    worst = max(abs(rounds * (a + b * x) - t) / t for x, (*_r, t) in zip(xs, points))
    byts = (128 + bn / cm) * 128.0  # A's rows and this block's share of B's, 128 bytes each
    tensor = 2.0 * 128 * bn * bk / (peak_flops / sms) if peak_flops > 0 else 0.0
    return Fit(family, bn, cm, len(points), rounds, a * 1e6, b * 1e6, active * byts / b / 1e12 if b > 0 else 0.0,
               tensor * 1e6, worst, pp)


def fits_of(entries, peaks: dict[str, float] | None = None) -> list[Fit]:
    """Fits per (family, BN, Cm, Pp, M, N) of a results folder's entries (bench.model.results.Entry)."""
    groups: dict[tuple[str, int, int, int, int, int], list] = {}
    for e in entries:
        base = e.parsed.base
        if base not in FAMILIES or e.time_s is None or not e.parsed.targs:
            continue
        a = e.parsed.args()
        bn = int(re.sub(r"\D", "", e.parsed.targs[0]) or 0)
        cm = int(re.sub(r"\D", "", e.parsed.targs[1]) or 1) if len(e.parsed.targs) > 1 else 1
        pp = int(re.sub(r"\D", "", e.parsed.targs[2]) or 0) if len(e.parsed.targs) > 2 else 0
        groups.setdefault((base, bn, cm, pp, a["M"], a["N"]), []).append((a["M"], a["N"], a["K"], e.time_s))
    out = []
    for (base, bn, cm, pp, _m, _n), pts in sorted(groups.items()):
        peak = (peaks or {}).get(FAMILIES[base][2], 0.0)
        f = fit(pts, base, bn, peak, cm=cm, pp=pp)
        if f is not None:
            out.append(f)
    return out


def lines(fits: list[Fit]) -> list[str]:
    if not fits:
        return []
    out = ["== Hopper GEMM per round (K sweep, bench/model/gemm_rounds.py): time = rounds x (F + k-tiles x slope)",
           f"   {'kernel':<18} {'BN':>4} {'Cm':>3} {'Pp':>3} {'rounds':>6} {'F us':>7} {'slope us':>9} "
           f"{'tensor us':>9} {'L2 TB/s':>8} {'fit err':>7}"]
    for f in fits:
        out.append(f"   {f.family:<18} {f.bn:>4} {f.cm:>3} {f.pp:>3} {f.rounds:>6} {f.f_us:>7.2f} "
                   f"{f.slope_us:>9.3f} {f.tensor_us:>9.3f} {f.l2_tbps:>8.2f} {100 * f.worst_residual:>6.1f}%")
    by = {(f.family, f.bn, f.cm): f for f in fits if f.pp == 0}
    pps = {(f.family, f.bn, f.cm): f for f in fits if f.pp == 1}
    for fam in FAMILIES:
        for cm in (1, 2):
            lo, hi = by.get((fam, 128, cm)), by.get((fam, 256, cm))
            if lo and hi and lo.slope_us > 0:
                r, byts = hi.slope_us / lo.slope_us, (128 + 256 / cm) / (128 + 128 / cm)
                verdict = f"L2-bound (bytes: {byts:.2f}x)" if r < (byts + 2) / 2 else "tensor-bound (FLOPs: 2x)"
                out.append(f"   {fam} Cm {cm}: slope 256 / 128 = {r:.2f}: {verdict}")
        for bn in (128, 256):
            one, two = by.get((fam, bn, 1)), by.get((fam, bn, 2))
            if one and two and one.slope_us > 0:
                bytes_ratio = (128 + bn / 2) / (128 + bn)
                out.append(f"   {fam} BN {bn}: multicast slope / plain = {two.slope_us / one.slope_us:.2f} "
                           f"(L2 bytes {bytes_ratio:.2f}x), F {two.f_us:.2f} vs {one.f_us:.2f} us")
        for cm in (1, 2):
            coop, pp = by.get((fam, 128, cm)), pps.get((fam, 128, cm))
            if coop and pp and coop.slope_us > 0:
                out.append(f"   {fam} BN 128 Cm {cm}: ping-pong F {pp.f_us:.2f} vs cooperative {coop.f_us:.2f} us, "
                           f"slope {pp.slope_us / coop.slope_us:.2f}x")
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
