#!/usr/bin/env python3
"""Summary of a GPU results folder: every llmk benchmark next to its anchor, its roofline and the cost model.

  scripts/perf/summarize.py <results folder> [--static FILE] [--full]
  scripts/perf/summarize.py --check <results folder> [--bench-filter REGEX]

Reads <folder>/bench/*.json and <folder>/anchors/*.json (Google Benchmark JSON), meta.json (the GPU) and the static
gate report (--static, default <folder>/static/report.tsv when present). Pairs each llmk benchmark with its anchor
of the same shape (bench/model/pairs.py, printed below), computes
  ratio          anchor time / llmk time (> 1: llmk is faster)
  % of roofline  roofline time / measured time (bench/model/predict.py)
  % copy         bytes/s over the measured BM_DeviceCopy's (memory-bound rows only)
  predicted      the cost model's time from the SASS counts, and measured / predicted (calibration)
Writes <folder>/summary.md and <folder>/summary.txt and prints the table LAST. Skipped and errored benchmarks are
listed, never dropped. --full: every row (anchors and host runs too) and more columns.
Exit: 0 (a report, whatever the ratios), 2 when the folder, meta.json, a JSON file or the static report is unreadable
(the table of what could be read is still printed).
--check: no table; the run's verdict (bench/model/checks.py): one 'FAIL: ...' line per failure (errored or skipped
rows outside the allowlist, missing or unreadable JSON, llmk rows without their anchor) and 'warning: ...' lines;
exit 1 on any failure, 0 when none, 2 when the folder is unreadable. --bench-filter: the run's filter (missing
anchors it excluded are warnings; empty binaries too). scripts/gpu_validate.sh runs it after the benchmarks.
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from model import checks, gemm_rounds, hardware, pairs, report, results, sass  # noqa: E402
from model.units import fmt_pct, fmt_rate, fmt_ratio, fmt_time, table  # noqa: E402

HEADERS = ["kernel", "shape", "llmk time", "anchor", "anchor time", "ratio", "% of roofline", "% copy",
           "predicted time", "measured/predicted"]
FULL_HEADERS = HEADERS + ["achieved", "roofline", "bound", "note"]


def rel(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def anchor_cells(r: report.Row) -> tuple[str, str]:
    if r.anchor is None:
        return "-", "-"
    name = r.anchor + (" (cross-dtype)" if r.anchor_cross else "")  # pairs.py: another precision, deliberately
    if r.anchor_entry is not None:
        return name, fmt_time(r.anchor_time)
    if r.anchor_error is not None:
        return f"{name} (error)", "n/a"
    return f"{name} (missing)", "n/a"


def cells(r: report.Row, full: bool) -> list[str]:
    a_name, a_time = anchor_cells(r)
    c = [r.family, r.shape, fmt_time(r.time_s), a_name, a_time, fmt_ratio(r.ratio), fmt_pct(r.roofline_frac),
         fmt_pct(r.copy_frac) if r.copy_frac is not None else "-",
         fmt_time(r.pred.time) if r.pred else "n/a", fmt_ratio(r.measured_over_predicted)]
    if full:
        note = "; ".join(([f"predicted {fmt_time(r.pred.fast)}-{fmt_time(r.pred.slow)}"] if r.pred else []) +
                         ([r.pred.note] if r.pred and r.pred.note else []) +
                         ([r.pred_reason] if r.pred_reason else []) + r.notes +
                         ([r.entry.collapsed] if r.entry.collapsed else []))
        c += [fmt_rate(r.achieved_flops, r.achieved_bytes, r.roof.bound if r.roof else ""),
              fmt_time(r.roof.time) if r.roof else "n/a",
              f"{r.roof.bound} ({r.roof.kind})" if r.roof else "n/a", note]
    return c


def table_lines(rep: report.Report, full: bool) -> list[str]:
    rows = [r for r in rep.rows if full or r.role in ("llmk", "unknown")]
    lines = table(FULL_HEADERS if full else HEADERS, [cells(r, full) for r in rows], right={2, 4, 5, 6, 7, 8, 9})
    shown = "every benchmark" if full else "llmk benchmarks; --full adds the anchors and more columns"
    lines.append(f"({len(rows)} rows, {shown}. ratio = anchor time / llmk time, > 1: llmk faster. "
                 "predicted = the cost model's estimate, not a measurement.)")
    return lines


def header_lines(folder: Path, rep: report.Report, res: results.Results) -> list[str]:
    m = res.meta
    out = [f"== llmk GPU results: {rel(folder)}"]
    if m.get("synthetic") or "synthetic" in str(m.get("WARNING", "")).lower():
        out.append("   !! SYNTHETIC TEST DATA (meta.json says so): these numbers are NOT measurements")
    out.append(f"   gpu: {m.get('gpu', '?')} -> model {rep.gpu.key} ({rep.gpu_note}); driver {m.get('driver', '?')}, "
               f"nvcc {m.get('nvcc_version', '?')}, torch {m.get('torch_version', '?')}, sha {m.get('sha', '?')}, "
               f"date {m.get('date', '?')}, arch {m.get('arch', '?')}")
    clocks = m.get("clocks") or {}
    if clocks:
        out.append("   clocks (nvidia-smi): " + ", ".join(f"{k} {v}" for k, v in clocks.items()))
    out.append(f"   achievable bandwidth for predictions: {rep.copy_source}")
    for f, ctx in res.contexts.items():
        if f.startswith("anchors/"):
            keys = ("torch_version", "gpu", "flash_impl", "gqa", "timing")
            out.append(f"   {f}: " + "; ".join(f"{k} {ctx[k]}" for k in keys if ctx.get(k)))
    out.append(f"   static report: {rep.static_note}")
    for n in rep.notes:
        out.append(f"   note: {n}")
    return out


def pairing_lines() -> list[str]:
    out = ["== pairing (bench/model/pairs.py)"]
    out += ["   " + line for line in table(["llmk", "anchor", "what"], [list(p) for p in pairs.pairing_table()])]
    return out


def problem_lines(rep: report.Report, res: results.Results) -> list[str]:
    out = [f"== skipped / errored benchmarks: {len(rep.errors)}"]
    arch = str(res.meta.get("arch", ""))
    for e in rep.errors:
        why = checks.allowed_reason(e, arch)
        out.append(f"   {e.file}: {e.name}: {e.error}" + (f" (expected, checks.ALLOWED: {why})" if why else ""))
    if res.empty:
        out.append(f"== empty JSON (the filter matched nothing there): {', '.join(res.empty)}")
    if res.not_run:
        out.append(f"== not run (not_run.txt: the run's time budget): {', '.join(res.not_run)}")
    if res.problems:
        out.append("== problems.txt (scripts/gpu_validate.sh):")
        out += [f"   {p}" for p in res.problems]
    if rep.unreadable:
        out.append(f"== unreadable files: {len(rep.unreadable)}")
        for f, why in rep.unreadable:
            out.append(f"   {f}: {why}")
    noted = [r for r in rep.rows if r.notes]
    if noted:
        out.append(f"== notes: {len(noted)} rows")
        for r in noted:
            out.append(f"   {r.entry.name}: {'; '.join(r.notes)}")
    missing = sorted({r.anchor for r in rep.rows if r.anchor and r.anchor_entry is None and r.anchor_error is None})
    if missing:
        out.append("== anchors not measured in this folder: " + ", ".join(missing))
    return out


def round_lines(res: results.Results, rep: report.Report) -> list[str]:
    """The K sweep's fit (bench/model/gemm_rounds.py); nothing when the folder has no sweep."""
    peaks = {"wgmma_f16": rep.gpu.tc_f16_dense, "wgmma_i8": rep.gpu.tc_i8_dense}
    return gemm_rounds.lines(gemm_rounds.fits_of(res.entries, peaks))


def markdown(folder: Path, rep: report.Report, res: results.Results) -> str:
    def md_table(headers, rows):
        esc = [[c.replace("|", "\\|").replace("<", "&lt;") for c in row] for row in rows]
        return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)] + \
               ["| " + " | ".join(r) + " |" for r in esc]
    out = [f"# GPU results: {folder.name}", ""]
    out += ["```"] + header_lines(folder, rep, res) + ["```", ""]
    out += ["## llmk benchmarks", "",
            "ratio = anchor time / llmk time (> 1: llmk faster); % of roofline = roofline time / measured time; "
            "% copy = bytes/s over the measured device-to-device copy's; **predicted** = the cost model "
            "(bench/model/README.md), not a measurement; measured/predicted calibrates it.", ""]
    full_rows = [cells(r, True) for r in rep.rows if r.role in ("llmk", "unknown")]
    out += md_table(FULL_HEADERS, full_rows) + [""]
    anchors = [cells(r, True) for r in rep.rows if r.role not in ("llmk", "unknown")]
    if anchors:
        out += ["## Anchors and host runs", ""] + md_table(FULL_HEADERS, anchors) + [""]
    out += ["## Pairing", ""] + md_table(["llmk", "anchor", "what"], [list(p) for p in pairs.pairing_table()]) + [""]
    rounds = round_lines(res, rep)
    if rounds:
        out += ["## Hopper GEMM per round (K sweep)", "", "```"] + rounds + ["```", ""]
    out += ["## Skipped, errored, unreadable", "", "```"] + problem_lines(rep, res) + ["```", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--static", type=Path, help="static gate report.tsv (default: <folder>/static/report.tsv)")
    ap.add_argument("--full", action="store_true", help="print every row and more columns")
    ap.add_argument("--check", action="store_true", help="only the run's verdict (exit 1 on a failure)")
    ap.add_argument("--bench-filter", help="with --check: the --bench-filter the run was given")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)

    try:
        res = results.load(args.folder)
    except results.Unreadable as e:
        print(f"summarize: unreadable input: {e}", file=sys.stderr)
        return 2
    gpu, gpu_note = hardware.pick_gpu(res.meta.get("gpu"))
    if args.check:
        v = checks.check(res, report.build(res, gpu, gpu_note, None).rows, args.bench_filter or None)
        for e, why in v.allowed:
            print(f"expected: {e.name}: {e.error} ({why})")
        print("\n".join([f"warning: {w}" for w in v.warnings] + [f"FAIL: {f}" for f in v.failures]))
        if v.ok:
            print(f"check: ok ({len(res.entries)} rows" + ("; see the warnings above)" if v.warnings else
                  ", no errored row, every expected output and anchor present)"))
        return 0 if v.ok else 1
    static_path = args.static or (args.folder / "static" / "report.tsv")
    static_rows, static_note, bad_static = None, "none (predicted time n/a)", False
    if args.static or static_path.is_file():
        try:
            static_rows = sass.read_report(static_path)
            static_note = f"{rel(static_path)}: {len(sass.benchmark_rows(static_rows))} sm_90 ndebug rows"
        except (OSError, ValueError) as e:
            static_note = f"UNREADABLE {static_path}: {e} (predicted time n/a)"
            bad_static = True
    rep = report.build(res, gpu, gpu_note, static_rows, static_note)

    head = header_lines(args.folder, rep, res) + pairing_lines() + round_lines(res, rep) + problem_lines(rep, res)
    full_table = table_lines(rep, True)
    try:
        (args.folder / "summary.txt").write_text("\n".join(head + [""] + full_table) + "\n")
        (args.folder / "summary.md").write_text(markdown(args.folder, rep, res) + "\n")
        wrote = f"wrote {rel(args.folder / 'summary.md')} and {rel(args.folder / 'summary.txt')}"
    except OSError as e:
        wrote = f"could not write the summary files: {e}"
    print("\n".join(head))
    print(wrote)
    print()
    print("\n".join(full_table if args.full else table_lines(rep, False)))
    return 2 if (rep.unreadable or bad_static) else 0


if __name__ == "__main__":
    sys.exit(main())
