#!/usr/bin/env python3
"""The cost model's table: roofline and PREDICTED time of every GPU benchmark shape, without any measurement.

  python3 bench/model/model.py [--static static/report.tsv] [--gpu "NVIDIA H100 80GB HBM3"] [--shapes default]
                               [--only REGEX] [--copy-bw BYTES_PER_S]

--static: the static gate report (scripts/perf/static_gates.py --report DIR writes DIR/report.tsv); without it the
prediction column is n/a (roofline only). --shapes default: the llmk benchmarks' GPU shapes; all: the anchors too.
--copy-bw: a measured device-to-device copy bandwidth (read + written bytes/s) instead of 90% of nominal.
Formulas: bench/model/README.md and bench/model/predict.py. Exit 0, or 2 on a bad argument or unreadable report.
"""
from __future__ import annotations

import argparse
import re
import signal
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # bench/: 'model' is this package, not this file

from model import hardware, names, predict, sass, shapes, work  # noqa: E402
from model.units import fmt_count, fmt_pct, fmt_time, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def rel(p: Path) -> str:
    p = Path(p).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--static", type=Path, help="static/report.tsv of the sm_90 build")
    ap.add_argument("--gpu", default=hardware.DEFAULT_GPU_NAME, help="GPU name as nvidia-smi prints it")
    ap.add_argument("--shapes", default="default", choices=["default", "all"])
    ap.add_argument("--only", help="regex on the benchmark name")
    ap.add_argument("--copy-bw", type=float, help="measured copy bandwidth, bytes/s (read + written)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `model.py | head` ends quietly

    gpu, gpu_note = hardware.pick_gpu(args.gpu)
    copy_bw = args.copy_bw or gpu.copy_bytes_per_s()
    static_rows = None
    if args.static:
        try:
            static_rows = sass.read_report(args.static)
        except (OSError, ValueError) as e:
            print(f"model.py: cannot read {args.static}: {e}", file=sys.stderr)
            return 2
    cases = shapes.default_cases(anchors=args.shapes == "all")
    if args.only:
        cases = [c for c in cases if re.search(args.only, c)]

    print(f"== llmk cost model: {gpu.name} ({gpu_note}); every time below is PREDICTED or a roofline, none measured")
    print(f"   {gpu.sms} SMs; HBM {gpu.hbm_bytes_per_s / 1e12:.2f} TB/s nominal, "
          f"{copy_bw / 1e12:.2f} TB/s achievable copy ({'given' if args.copy_bw else 'assumed 90%'}); "
          f"wgmma fp16 {gpu.tc_f16_dense / 1e12:.0f} TFLOP/s, int8/fp8 {gpu.tc_i8_dense / 1e12:.0f} TOPS; "
          f"mma.sync {hardware.MMA_SYNC_FRACTION[0]:.2f}-{hardware.MMA_SYNC_FRACTION[1]:.2f} of wgmma (assumption)")
    print(f"   sustained clock {gpu.sustained_clk_hz / 1e9:.3f} GHz (assumption), {hardware.ISSUE_SLOTS_PER_SM} issue "
          f"slots/clk/SM; sources: {gpu.sources}")
    if static_rows is None:
        print("   no --static report: roofline only, predicted time n/a")
    else:
        used = len(sass.benchmark_rows(static_rows))
        print(f"   static report {rel(args.static)}: {used} sm_90 ndebug rows of {len(static_rows)}")

    headers = ["benchmark", "shape", "FLOPs", "bytes", "roofline bound", "roofline", "predicted time",
               "predicted % of roofline", "predicted range", "note"]
    rows = []
    for name in cases:
        bn = names.parse(name)
        fam = work.family_of(bn.base)
        if fam is None or fam.role == "host":
            continue
        a = bn.args(fam.args)
        w = work.work_of(fam, a, bn.targs)
        if w is None:
            continue
        m = sass.match(fam.base, a, bn.targs, static_rows) if static_rows is not None else None
        kind = predict.kind_from_sass(fam, m.row if m else None, a)[0]
        roof = predict.roofline(w, gpu, kind)
        if static_rows is None:
            pred, why = None, ""  # the header says so once
        else:
            pred, why = predict.predict(w, gpu, fam, m, copy_bw)
        rows.append([bn.family, names.short_shape(a), fmt_count(w.flops), fmt_count(w.bytes),
                     f"{roof.bound} ({kind})", fmt_time(roof.time),
                     fmt_time(pred.time) if pred else "n/a",
                     fmt_pct(roof.time / pred.time) if pred and pred.time else "n/a",
                     f"{fmt_time(pred.fast)}-{fmt_time(pred.slow)}" if pred else "n/a",
                     (pred.note if pred else why)])
    print()
    for line in table(headers, rows, right={2, 3, 5, 6, 7}):
        print(line)
    print(f"({len(rows)} shapes; predicted = the cost model's estimate, not a measurement; "
          "roofline = max(FLOPs / peak, bytes / nominal HBM))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
