"""How long the GPU command's benchmarks take: Google Benchmark's iteration search against one-pass timing.

Google Benchmark (1.7, Debian's) finds a benchmark's iteration count by calling the benchmark function again and
again: 1 iteration, then up to 10x more per call (1.4 x min_time / measured time) until the measured (manual) time
reaches min_time. Each call builds the benchmark's data again (llmk's benchmarks allocate and fill their
operands, several weight copies of up to ~180 MiB), so a benchmark costs about

    framework:  sum over its calls of (setup + (iterations + 1) x (t + overhead))     (4.4 calls on average)
    one pass:   setup + (samples + 1) x (t + overhead),  samples = clamp(min_time / t, 5, 200)

where t is the kernel's time, overhead the per-sample cost around it (the spin kernel, at least 20 us, two events and
a synchronization: about 40 us) and `+ 1` the warm-up call (two since 2026-11-29, the second timing the host's
share to size the spin: one more t, left out of the model). One pass is bench/support/gpu_timer.hpp's
LLMK_BENCH_ONE_PASS_S mode, which scripts/gpu_validate.sh uses.

Setup per call is fitted, not measured: the 2026-11-25 run at 2bcc0c2 stopped the quant GEMM binary at its 220 s
limit after 244 benchmarks whose recorded iteration counts this search model reproduces (242 of 244 within 30%),
which puts setup at about 0.165 s a call. A prediction until a one-pass run's logs/bench_times.txt measures it.

    python3 -m bench.model.run_time bench/results/<folder> [--setup 0.165] [--min-time 0.05]
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

SETUP_S = 0.165     # fitted (module doc)
OVERHEAD_S = 40e-6  # spin kernel + events + synchronization per sample
MIN_SAMPLES, MAX_SAMPLES = 5, 200  # gpu_timer.hpp: kOnePassMinSamples, kOnePassMaxSamples


def framework_search(t: float, min_time: float = 0.05, max_iterations: int = 1_000_000_000):
    """Google Benchmark 1.7's iteration counts for a benchmark of t seconds a call: the list of the counts of
    each call of the benchmark function (the last is the one reported)."""
    iters, calls = 1, []
    while True:
        calls.append(iters)
        total = iters * t
        if total >= min_time or iters >= max_iterations:
            return calls
        multiplier = min_time * 1.4 / max(total, 1e-9)
        if total / min_time <= 0.1:
            multiplier = min(multiplier, 10.0)
        iters = min(max(int(multiplier * iters + 0.5), iters + 1), max_iterations)


def framework_wall(t: float, setup: float = SETUP_S, overhead: float = OVERHEAD_S, min_time: float = 0.05) -> float:
    return sum(setup + (n + 1) * (t + overhead) for n in framework_search(t, min_time))


def one_pass_samples(t: float, min_time: float = 0.05) -> int:
    return min(max(math.ceil(min_time / max(t, 1e-12)), MIN_SAMPLES), MAX_SAMPLES)


def one_pass_wall(t: float, setup: float = SETUP_S, overhead: float = OVERHEAD_S, min_time: float = 0.05) -> float:
    return setup + (one_pass_samples(t, min_time) + 1) * (t + overhead)


def main(argv=None) -> int:
    from . import results

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--setup", type=float, default=SETUP_S, help="seconds of setup per benchmark call")
    ap.add_argument("--min-time", type=float, default=0.05)
    a = ap.parse_args(argv)
    r = results.load(a.folder)
    per_file: dict[str, list[float]] = {}
    for e in r.entries:
        if e.file.startswith("bench/") and e.time_s is not None:
            per_file.setdefault(e.file, []).append(e.time_s)
    print(f"{'binary':<40} {'benchmarks':>10} {'framework s':>12} {'one pass s':>11}")
    tot_f = tot_o = 0.0
    for f, ts in sorted(per_file.items()):
        fw = sum(framework_wall(t, a.setup, min_time=a.min_time) for t in ts)
        op = sum(one_pass_wall(t, a.setup, min_time=a.min_time) for t in ts)
        tot_f, tot_o = tot_f + fw, tot_o + op
        print(f"{Path(f).stem:<40} {len(ts):>10} {fw:>12.1f} {op:>11.1f}")
    print(f"{'total':<40} {sum(map(len, per_file.values())):>10} {tot_f:>12.1f} {tot_o:>11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
