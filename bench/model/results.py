"""Reading a results folder (bench/results/<date>-<gpu>-<sha7>/): meta.json, bench/*.json, anchors/*.json.

Google Benchmark JSON: every entry has name, run_type ('iteration' or 'aggregate'), real_time in time_unit and its
counters as top-level keys. Repetitions are collapsed to one entry per file and run name: the 'median' aggregate when
there is one, else 'mean', else the median of the iteration entries. An entry with error_occurred (SkipWithError:
error_message) or skipped (SkipWithMessage, Google Benchmark >= 1.8: skip_message) is kept as an error, and so is
one without a real_time (never dropped); a file that is not JSON is listed as unreadable, an empty one (a binary
whose --benchmark_filter matched nothing writes 0 bytes) as empty.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from . import names
from .units import TIME_UNIT_S

# Google Benchmark's own keys: every other numeric top-level key is a counter
GB_ENTRY_KEYS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
                 "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
                 "aggregate_name", "aggregate_unit", "error_occurred", "error_message", "label", "skipped",
                 "skip_message"}


class Unreadable(Exception):
    """The folder or its meta.json cannot be read at all."""


@dataclass
class Entry:
    name: str  # run name (no aggregate suffix)
    file: str  # bench/<binary>.json or anchors/<x>.json
    parsed: names.BenchName
    time_s: float | None  # seconds per iteration
    iterations: int
    counters: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    collapsed: str = ""  # '' or e.g. 'median of 3 repetitions'


@dataclass
class Results:
    folder: Path
    meta: dict
    entries: list[Entry]  # measured, collapsed
    errors: list[Entry]  # error_occurred, skipped, or no real_time
    unreadable: list[tuple[str, str]]  # (file, why)
    notes: list[str]
    contexts: dict[str, dict] = field(default_factory=dict)  # file -> its Google Benchmark "context"
    not_run: list[str] = field(default_factory=list)  # not_run.txt: benchmarks the run's time budget cut
    problems: list[str] = field(default_factory=list)  # problems.txt: what gpu_validate.sh reported failed
    files: list[str] = field(default_factory=list)  # every bench/ and anchors/ JSON found (relative), read or not
    empty: list[str] = field(default_factory=list)  # 0-byte JSON: the binary's filter matched nothing


def _entry(b: dict, rel: str) -> Entry:
    run_name = b.get("run_name") or names.strip_aggregate(b.get("name", ""))[0]
    unit = TIME_UNIT_S.get(b.get("time_unit", "ns"), 1e-9)
    t = b.get("real_time")
    counters = {k: float(v) for k, v in b.items()
                if k not in GB_ENTRY_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)}
    err = None
    if b.get("error_occurred"):  # SkipWithError
        err = b.get("error_message") or "error_occurred (no message)"
    elif b.get("skipped"):  # SkipWithMessage (Google Benchmark >= 1.8 writes skipped / skip_message)
        err = f"skipped: {b.get('skip_message') or b.get('error_message') or '(no message)'}"
    return Entry(run_name, rel, names.parse(run_name), float(t) * unit if isinstance(t, (int, float)) else None,
                 int(b.get("iterations", 0) or 0), counters, err)


def collapse(raw: list[tuple[dict, Entry]]) -> tuple[list[Entry], list[Entry]]:
    """One entry per run name (see the module doc); (measured, errors), in first-seen order."""
    groups: dict[tuple[str, str], list[tuple[dict, Entry]]] = {}
    for b, e in raw:  # per file: BM_DeviceCopy runs in two binaries, two measurements
        groups.setdefault((e.file, e.name), []).append((b, e))
    measured, errors = [], []
    for _key, items in groups.items():
        errs = [e for _b, e in items if e.error]
        if errs:
            errors.append(errs[0])
            continue
        aggs = {b.get("aggregate_name"): e for b, e in items if b.get("run_type") == "aggregate"}
        its = [e for b, e in items if b.get("run_type", "iteration") == "iteration"]
        if "median" in aggs or "mean" in aggs:
            which = "median" if "median" in aggs else "mean"
            e = aggs[which]
            if e.time_s is None:
                e.error = f"no real_time in the {which} aggregate"
                errors.append(e)
                continue
            e.collapsed = f"{which} of {len(its) or '?'} repetitions"
            measured.append(e)
        elif its:
            usable = [e for e in its if e.time_s is not None]
            if not usable:  # no time to report: an error, not a silent gap
                its[0].error = "no real_time in the JSON entry"
                errors.append(its[0])
                continue
            if len(usable) == 1:
                measured.append(usable[0])
            else:
                mid = sorted(usable, key=lambda e: e.time_s)[len(usable) // 2]
                mid.time_s = statistics.median(e.time_s for e in usable)
                mid.collapsed = f"median of {len(usable)} repetitions"
                measured.append(mid)
        else:  # aggregates without a mean or median: nothing to report as a time
            e = items[0][1]
            e.error = "no iteration entry and no mean / median aggregate"
            errors.append(e)
    return measured, errors


def _truncated(text: str):
    """A Google Benchmark JSON cut off by a time limit (the binary writes entries as it goes): the complete
    entries before the cut, or None when the text is not such a file."""
    start = text.find('"benchmarks": [')
    if start < 0:
        return None
    end = text.rfind("\n    }")
    while end > start:
        try:
            return json.loads(text[:end + 6] + "\n  ]\n}")
        except ValueError:
            end = text.rfind("\n    }", start, end)
    return None


def load(folder: Path) -> Results:
    folder = Path(folder)
    if not folder.is_dir():
        raise Unreadable(f"{folder}: not a directory")
    notes = []
    meta: dict = {}
    meta_path = folder / "meta.json"
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as e:
            raise Unreadable(f"{meta_path}: {e}") from e
        if not isinstance(meta, dict):
            raise Unreadable(f"{meta_path}: not a JSON object")
    else:
        notes.append("no meta.json: GPU unknown")
    files = sorted((folder / "bench").glob("*.json")) + sorted((folder / "anchors").glob("*.json"))
    if not files:
        raise Unreadable(f"{folder}: no JSON in bench/ or anchors/")
    raw, unreadable, contexts, empty = [], [], {}, []
    for p in files:
        rel = p.relative_to(folder).as_posix()
        try:
            text = p.read_text()
            if not text.strip():  # Google Benchmark opens --benchmark_out before it finds no benchmark to run
                empty.append(rel)
                continue
            try:
                doc = json.loads(text)
            except ValueError:
                doc = _truncated(text)
                if doc is None:
                    raise
                notes.append(f"{rel}: truncated (the binary was stopped): its {len(doc['benchmarks'])} complete "
                             "entries are read")
            bench = doc["benchmarks"] if isinstance(doc, dict) else None
            if not isinstance(bench, list):
                raise ValueError("no 'benchmarks' list")
        except (OSError, ValueError, KeyError) as e:
            unreadable.append((rel, str(e).splitlines()[0][:200]))
            continue
        if isinstance(doc.get("context"), dict):
            contexts[rel] = doc["context"]
        for b in bench:
            if isinstance(b, dict) and b.get("name"):
                raw.append((b, _entry(b, rel)))
    measured, errors = collapse(raw)

    def lines(name):
        p = folder / name
        return [l.strip() for l in p.read_text(errors="replace").splitlines() if l.strip()] if p.is_file() else []
    return Results(folder, meta, measured, errors, unreadable, notes, contexts, lines("not_run.txt"),
                   lines("problems.txt"), [p.relative_to(folder).as_posix() for p in files], empty)
