#!/usr/bin/env python3
"""PNG plots of a GPU results folder: per llmk benchmark family, achieved throughput against the roofline, and llmk
against its anchor, across shapes.

  scripts/plot_results.py <results folder> [--out DIR] [--static FILE]

Writes DIR (default <folder>/plots)/<family>_roofline.png, <family>_vs_anchor.png (families with an anchor) and
index.md linking them. Throughput is TFLOP/s where the roofline says compute binds and GB/s where memory binds (a
family that spans both, e.g. a GEMM from M = 1 to 4096, gets one panel each). The roofline, the measured copy
bandwidth and the cost model's PREDICTED throughput are drawn for reference. Data and pairing: the same as
scripts/perf/summarize.py (bench/model/report.py).
Needs matplotlib (Agg backend). When it is missing: .gpu-deps/python is tried first (a machine without network can
carry it: `python3 -m pip install --target .gpu-deps/python matplotlib` where there is one), then
`python3 -m pip install --user matplotlib` (one try, 10 s network timeout, so an offline machine fails fast).
Exit: 0, or 2 when the folder is unreadable or matplotlib cannot be had.
"""
from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from model import hardware, predict, report, results, sass  # noqa: E402

PIP = [sys.executable, "-m", "pip", "install", "--user", "matplotlib"]
PIP_BOUNDED = ["--retries", "0", "--timeout", "10", "--disable-pip-version-check"]  # offline: fail in seconds
CARRIED = ROOT / ".gpu-deps" / "python"  # pip install --target .gpu-deps/python matplotlib (carried to a GPU machine)
STAMP = {"text": ""}  # a banner every figure carries (synthetic data)


def rel(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def need_matplotlib():
    """matplotlib.pyplot with the Agg backend, installed for this user if missing; None when that fails."""
    try:
        import matplotlib
    except ImportError:
        matplotlib = None
    if matplotlib is None and CARRIED.is_dir():
        sys.path.insert(0, str(CARRIED))
        try:
            import matplotlib
        except ImportError:
            sys.path.remove(str(CARRIED))
    if matplotlib is None:
        print(f"plot_results: matplotlib missing: {' '.join(PIP)}", file=sys.stderr)
        done = subprocess.run(PIP + PIP_BOUNDED, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            print(f"plot_results: pip failed ({tail[0]}); install matplotlib with: python3 -m pip install --user "
                  "matplotlib", file=sys.stderr)
            return None
        import site
        site.addsitedir(site.getusersitepackages())  # the user site may not have existed at start-up
        importlib.invalidate_caches()
        try:
            import matplotlib
        except ImportError:
            print("plot_results: matplotlib still not importable after pip; install it with: python3 -m pip "
                  "install --user matplotlib", file=sys.stderr)
            return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def slug(family: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", family).strip("_")


def throughput(r: report.Row, bound: str, seconds: float | None) -> float | None:
    """The row's work per second in the unit of `bound`: TFLOP/s (compute) or GB/s (memory)."""
    if not seconds:
        return None
    if bound == "memory":
        return r.traffic / seconds / 1e9 if r.traffic else None
    return r.flops / seconds / 1e12 if r.flops else None


def ceiling(r: report.Row, bound: str, gpu) -> float | None:
    if bound == "memory":
        return gpu.hbm_bytes_per_s / 1e9
    p = predict.peak(gpu, r.roof.kind) if r.roof else None
    return p / 1e12 if p else None


def finish(fig) -> None:
    if STAMP["text"]:
        fig.suptitle(STAMP["text"], color="red", fontsize=10, fontweight="bold")
    fig.tight_layout()


def save(plt, fig, path: Path) -> Path:
    """The synthetic-data banner (finish), the PNG, and the figure closed."""
    finish(fig)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_roofline(plt, family: str, rows: list[report.Row], rep: report.Report, out: Path) -> Path:
    bounds = [b for b in ("compute", "memory") if any(r.roof and r.roof.bound == b for r in rows)]
    fig, axes = plt.subplots(len(bounds), 1, figsize=(max(6.0, 0.9 * len(rows) + 3), 3.6 * len(bounds)),
                             squeeze=False)
    for ax, bound in zip(axes[:, 0], bounds):
        sel = [r for r in rows if r.roof and r.roof.bound == bound]
        x = list(range(len(sel)))
        unit = "GB/s" if bound == "memory" else "TFLOP/s"
        ax.plot(x, [throughput(r, bound, r.time_s) for r in sel], "o-", label="llmk measured")
        ax.plot(x, [ceiling(r, bound, rep.gpu) for r in sel], "k--", label="roofline")
        if bound == "memory":
            ax.axhline(rep.copy_bw / 1e9, color="gray", linestyle=":", label=f"copy ({rep.copy_source.split(' ')[0]})")
        pred = [throughput(r, bound, r.pred.time) if r.pred else None for r in sel]
        if any(p is not None for p in pred):
            ax.plot(x, [p if p is not None else float("nan") for p in pred], "s", mfc="none", label="predicted")
        anc = [throughput(r, bound, r.anchor_time) for r in sel]
        if any(a is not None for a in anc):
            ax.plot(x, [a if a is not None else float("nan") for a in anc], "^", label="anchor (same work)")
        ax.set_xticks(x, [r.shape for r in sel], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{family}: {bound}-bound shapes", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save(plt, fig, out / f"{slug(family)}_roofline.png")


def plot_anchor(plt, family: str, rows: list[report.Row], out: Path) -> Path | None:
    sel = [r for r in rows if r.anchor_time]
    if not sel:
        return None
    x = list(range(len(sel)))
    fig, (top, bot) = plt.subplots(2, 1, figsize=(max(6.0, 0.9 * len(sel) + 3), 6.4), sharex=True)
    w = 0.4
    top.bar([i - w / 2 for i in x], [r.time_s * 1e6 for r in sel], w, label="llmk")
    anchor = sel[0].anchor + (" (cross-dtype)" if sel[0].anchor_cross else "")  # pairs.py: another precision
    top.bar([i + w / 2 for i in x], [r.anchor_time * 1e6 for r in sel], w, label=anchor)
    top.set_yscale("log")
    top.set_ylabel("time (us)")
    top.legend(fontsize=7)
    top.set_title(f"{family} vs {anchor}", fontsize=9)
    ratios = [r.ratio for r in sel]
    bot.bar(x, ratios, color=["tab:green" if q >= 1 else "tab:red" for q in ratios])
    bot.axhline(1.0, color="k", linewidth=0.8)
    bot.set_ylabel("anchor time / llmk time")
    bot.set_xticks(x, [r.shape for r in sel], rotation=30, ha="right", fontsize=7)
    for ax in (top, bot):
        ax.grid(alpha=0.3)
    return save(plt, fig, out / f"{slug(family)}_vs_anchor.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--out", type=Path, help="output folder (default: <folder>/plots)")
    ap.add_argument("--static", type=Path, help="static gate report.tsv (default: <folder>/static/report.tsv)")
    args = ap.parse_args(argv)
    try:
        res = results.load(args.folder)
    except results.Unreadable as e:
        print(f"plot_results: unreadable input: {e}", file=sys.stderr)
        return 2
    plt = need_matplotlib()
    if plt is None:
        return 2
    gpu, note = hardware.pick_gpu(res.meta.get("gpu"))
    static_path = args.static or args.folder / "static" / "report.tsv"
    static_rows = None
    if static_path.is_file():
        try:
            static_rows = sass.read_report(static_path)
        except (OSError, ValueError) as e:
            print(f"plot_results: static report ignored: {e}", file=sys.stderr)
    rep = report.build(res, gpu, note, static_rows)
    out = args.out or args.folder / "plots"
    out.mkdir(parents=True, exist_ok=True)

    families: dict[str, list[report.Row]] = {}
    for r in rep.rows:
        if r.role in ("llmk", "unknown") and r.roof is not None:
            families.setdefault(r.family, []).append(r)
    synthetic = bool(res.meta.get("synthetic"))
    STAMP["text"] = "SYNTHETIC TEST DATA - NOT MEASUREMENTS" if synthetic else ""
    index = [f"# Plots: {args.folder.name}", ""]
    if synthetic:
        index += ["**SYNTHETIC TEST DATA: these plots show made-up numbers, not measurements.**", ""]
    index += [f"GPU: {res.meta.get('gpu', '?')} (model: {gpu.key}). Roofline: datasheet peak of the tensor-core "
              "instruction the kernel uses, and nominal HBM bandwidth; 'predicted' is the cost model "
              "(bench/model/README.md), not a measurement.", ""]
    written = []
    for family, rows in families.items():
        paths = [plot_roofline(plt, family, rows, rep, out), plot_anchor(plt, family, rows, out)]
        index.append(f"## {family}")
        index.append("")
        for p in paths:
            if p is not None:
                written.append(p)
                index.append(f"![{p.stem}]({p.name})")
        index.append("")
    (out / "index.md").write_text("\n".join(index) + "\n")
    print(f"plot_results: {len(written)} plots of {len(families)} families in {rel(out)} (index: "
          f"{rel(out / 'index.md')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
