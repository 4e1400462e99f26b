"""The verdict of a GPU run on its results folder: scripts/gpu_validate.sh fails unless this finds nothing.

Google Benchmark exits 0 after SkipWithError and after a --benchmark_filter that matched nothing, and a binary that
was never built (LAPACK missing for bench_obs, cuBLASLt missing for the GEMM anchors) leaves no trace at all: the
exit codes alone gave false greens. So, after the runs, the folder itself is checked
(`scripts/perf/summarize.py --check DIR [--bench-filter REGEX]`):

  failures   an errored (error_occurred), skipped (skipped) or untimed entry in bench/*.json or anchors/*.json,
             unless ALLOWED below names it; an unreadable JSON; an expected JSON missing (one per bench/<name>.cu
             that is not sim-only, and anchors/torch_sdpa.json) or empty without a filter; an llmk row whose anchor
             (pairs.py) was not measured; a row timed at 0 s; with a filter, no benchmark at all.
  warnings   with --bench-filter: a binary the filter left empty, an llmk row whose anchor the filter excluded
             (its name does not match the filter: pass a filter that takes the anchor too, e.g. add |BM_CublasHgemm,
             to compare). An anchor the filter should have run (it matches) and that is missing still fails.

ALLOWED is the one place for expected refusals: each entry names the rows (regex on the run name), the message
they must fail with, the GPUs it applies to (regex on meta.json's arch; never the Hopper build's 90a, where every
kernel must run) and why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .results import Entry, Results

BENCH_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Allowed:
    name: str  # regex on the run name
    message: str  # regex on the error message: another failure of the same row is not allowed
    arch: str  # regex on meta.json's arch ('90a', '100a', '80', ...)
    reason: str


ALLOWED: list[Allowed] = [
    Allowed(r"^BM_(W4A16Hopper|W8A8Hopper|FP8Hopper|FP8Blockwise|Sm90Hgemm|Sm90KSweep(F16|I8))[</]",
            r"sm_90|[Hh]opper|unsupported", r"^(?!90a$)",
            "Hopper-only kernels (wgmma, TMA) refuse any GPU but sm_90 with sm_90a code"),
    Allowed(r"^BM_(FP8|CublasLtFp8|PrefillFp8)[</]", r"sm_89|fp8|unsupported|NOT_SUPPORTED", r"^(7\d|80|86|87)$",
            "fp8 tensor cores need sm_89 or newer"),
]


def expected_files(bench_dir: Path = BENCH_DIR) -> list[str]:
    """The JSON a full GPU run writes: bench/bench_<name>_cuda.json per bench/<name>.cu (sim_*.cu are sim-only)
    and the SDPA anchor's."""
    out = [f"bench/bench_{p.stem}_cuda.json" for p in sorted(bench_dir.glob("*.cu")) if not p.stem.startswith("sim_")]
    return out + ["anchors/torch_sdpa.json"]


def allowed_reason(e: Entry, arch: str, allowed: list[Allowed] | None = None) -> str | None:
    for a in ALLOWED if allowed is None else allowed:
        if re.search(a.name, e.name) and re.search(a.message, e.error or "") and re.search(a.arch, arch):
            return a.reason
    return None


@dataclass
class Verdict:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    allowed: list[tuple[Entry, str]] = field(default_factory=list)  # expected refusals, with their reason

    @property
    def ok(self) -> bool:
        return not self.failures


def _names(items: list[str], most: int = 8) -> str:
    head = ", ".join(items[:most])
    return head + (f" and {len(items) - most} more (summary.md)" if len(items) > most else "")


def _filter_matches(bench_filter: str, name: str) -> bool | None:
    """Whether Google Benchmark's --benchmark_filter would run `name` (a leading '-' negates); None: the regex is
    not one Python reads."""
    neg = bench_filter.startswith("-")
    try:
        hit = re.search(bench_filter[1:] if neg else bench_filter, name) is not None
    except re.error:
        return None
    return hit != neg


def _anchor_name(row) -> str:
    """The anchor's run name for this row: the llmk name with the anchor's family when every argument is
    matched, else the family, the matched arguments (named) and the time suffix."""
    if row.anchor_keys is None:
        return row.anchor + "/" + row.entry.name.split("/", 1)[-1]
    return "/".join([row.anchor] + [f"{k}:{row.args[k]}" for k in row.anchor_keys if k in row.args] +
                    ["manual_time"])


def check(res: Results, rows, bench_filter: str | None = None, allowed: list[Allowed] | None = None,
          expected: list[str] | None = None) -> Verdict:
    """rows: report.build(...).rows (their anchors found). See the module doc."""
    v = Verdict()
    arch = str(res.meta.get("arch", ""))
    bad = []
    for e in res.errors:
        why = allowed_reason(e, arch, allowed)
        if why:
            v.allowed.append((e, why))
        else:
            bad.append(f"{e.name} ({e.file}: {e.error})")
    if bad:
        v.failures.append(f"{len(bad)} errored / skipped benchmark rows: {_names(bad, 5)}")
    zero = [e.name for e in res.entries if not e.time_s]
    if zero:
        v.failures.append(f"{len(zero)} rows timed at 0 s: {_names(zero)}")
    if res.unreadable:
        v.failures.append(f"unreadable JSON: {_names([f'{f} ({why})' for f, why in res.unreadable], 4)}")

    not_run = set(res.not_run)  # cut by the time budget: gpu_validate.sh already fails for them
    missing = [f for f in (expected_files() if expected is None else expected)
               if f not in res.files and Path(f).stem not in not_run]
    if missing:
        v.failures.append(f"missing output (binary not built, e.g. LAPACK or cuBLASLt absent at configure, or not "
                          f"run): {_names(missing)}")
    if res.empty:
        if bench_filter:
            v.warnings.append(f"--bench-filter matched nothing in: {_names(res.empty)}")
        else:
            v.failures.append(f"no benchmark ran (empty JSON): {_names(res.empty)}")
    if bench_filter and not any(e.file.startswith("bench/") for e in res.entries + res.errors):
        v.failures.append(f"--bench-filter '{bench_filter}' matched no benchmark")

    absent, filtered = [], []
    for r in rows:
        if r.anchor is None or r.anchor_entry is not None or r.anchor_error is not None:
            continue  # no pair, measured, or errored (counted above unless allowed)
        name = _anchor_name(r)
        if bench_filter and not r.anchor.startswith("SDPA_") and _filter_matches(bench_filter, name) is False:
            filtered.append(r.entry.name)
        else:
            absent.append(f"{r.entry.name} -> {r.anchor}")
    if absent:
        anchors = sorted({a.split(" -> ")[1] for a in absent})
        v.failures.append(f"{len(absent)} llmk rows without their anchor ({', '.join(anchors)}; cuBLAS/cuBLASLt "
                          f"not linked, or the anchor failed to run): {_names(absent, 3)}")
    if filtered:
        v.warnings.append(f"{len(filtered)} llmk rows whose anchor --bench-filter excluded (no ratio): "
                          f"{_names(filtered, 3)}")
    return v
