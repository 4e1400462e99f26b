"""One row per measured benchmark: its work, roofline, anchor, prediction. Shared by summarize.py and the plots.

Work comes from the family's formula (work.py); when the entry's own counters (FLOP/s x time, bytes/s x time)
disagree with it by more than 2%, the counters win and the row says so. Families the model does not know use
their counters alone (roofline against the wgmma fp16 peak and HBM: an upper bound).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import names, pairs, predict, sass, work
from .hardware import Gpu
from .results import Entry, Results

MISMATCH = 0.02


@dataclass
class Row:
    entry: Entry
    family: str
    args: dict[str, int]
    role: str  # llmk, anchor, host, unknown
    time_s: float
    flops: float | None = None
    bytes: float | None = None
    traffic: float | None = None
    roof: predict.Roofline | None = None
    anchor: str | None = None  # anchor family
    anchor_what: str = ""
    anchor_cross: str = ""  # '' or what differs: a cross-dtype pair (pairs.py)
    anchor_keys: tuple[str, ...] | None = None  # the arguments the anchor must match (None: all)
    anchor_entry: Entry | None = None
    anchor_error: str | None = None
    pred: predict.Prediction | None = None
    pred_reason: str = ""
    copy_frac: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def shape(self) -> str:
        return names.short_shape(self.args)

    @property
    def anchor_time(self) -> float | None:
        return self.anchor_entry.time_s if self.anchor_entry else None

    @property
    def ratio(self) -> float | None:
        """anchor time / llmk time: > 1 means llmk is faster."""
        t = self.anchor_time
        return t / self.time_s if (t and self.time_s) else None

    @property
    def roofline_frac(self) -> float | None:
        """roofline time / measured time."""
        return self.roof.time / self.time_s if (self.roof and self.time_s) else None

    @property
    def measured_over_predicted(self) -> float | None:
        return self.time_s / self.pred.time if (self.pred and self.pred.time > 0) else None

    @property
    def achieved_flops(self) -> float | None:
        return self.flops / self.time_s if (self.flops and self.time_s) else None

    @property
    def achieved_bytes(self) -> float | None:
        return self.bytes / self.time_s if (self.bytes and self.time_s) else None


@dataclass
class Report:
    rows: list[Row]
    errors: list[Entry]
    unreadable: list[tuple[str, str]]
    gpu: Gpu
    gpu_note: str
    copy_bw: float  # achievable bandwidth the predictions use
    copy_source: str
    static_note: str
    notes: list[str]


def _family_args(e: Entry) -> tuple[work.Family | None, dict[str, int]]:
    fam = work.family_of(e.parsed.base)
    return fam, e.parsed.args(fam.args if fam else None)


def _counter_work(e: Entry) -> tuple[float | None, float | None]:
    t = e.time_s or 0.0
    f, b = e.counters.get("FLOP/s"), e.counters.get("bytes/s")
    return (f * t if f is not None else None), (b * t if b is not None else None)


def measured_copy_bw(entries: list[Entry]) -> float | None:
    """The best measured BM_DeviceCopy bytes/s (read + written counted), or None."""
    best = None
    for e in entries:
        if e.parsed.base != pairs.COPY_ANCHOR or not e.time_s:
            continue
        bw = e.counters.get("bytes/s")
        if bw is None:
            fam, args = _family_args(e)
            w = work.work_of(fam, args, e.parsed.targs) if fam else None
            bw = w.bytes / e.time_s if w else None
        if bw and (best is None or bw > best):
            best = bw
    return best


def _find_anchor(row: Row, entries: list[Entry], errors: list[Entry]) -> None:
    found = pairs.anchor_for(row.family)
    if not found:
        return
    anchor, keys, what, cross = found
    row.anchor, row.anchor_what, row.anchor_cross, row.anchor_keys = anchor, what, cross, keys
    want = {k: row.args.get(k) for k in keys} if keys else row.args
    for pool, is_error in ((entries, False), (errors, True)):
        for e in pool:
            if e.parsed.family.replace(" ", "") != anchor.replace(" ", ""):
                continue
            _fam, args = _family_args(e)
            have = {k: args.get(k) for k in keys} if keys else args
            if have == want:
                if is_error:
                    row.anchor_error = e.error
                else:
                    row.anchor_entry = e
                return


def build(results: Results, gpu: Gpu, gpu_note: str, static_rows: list[sass.KernelRow] | None,
          static_note: str = "") -> Report:
    copy = measured_copy_bw(results.entries)
    copy_bw = copy or gpu.copy_bytes_per_s()
    copy_source = (f"measured BM_DeviceCopy {copy / 1e12:.2f} TB/s" if copy else
                   f"assumed 90% of {gpu.hbm_bytes_per_s / 1e12:.2f} TB/s = {copy_bw / 1e12:.2f} TB/s")
    rows = []
    for e in results.entries:
        fam, args = _family_args(e)
        row = Row(e, e.parsed.family, args, fam.role if fam else "unknown", e.time_s or 0.0)
        w = work.work_of(fam, args, e.parsed.targs) if fam else None
        cf, cb = _counter_work(e)
        if w is not None:
            flops, byts, traffic = w.flops, w.bytes, w.traffic
            if cf is not None and flops and abs(cf - flops) > MISMATCH * flops:
                row.notes.append(f"FLOPs formula {flops:.4g} != counter {cf:.4g}: counter used")
                flops = cf
            if cb is not None and byts and abs(cb - byts) > MISMATCH * byts:
                row.notes.append(f"bytes formula {byts:.4g} != counter {cb:.4g}: counter used")
                traffic = traffic * cb / byts
                byts = cb
            w = work.Work(flops, byts, traffic, w.tensor_work, w.note, exps=w.exps)
        elif cf is not None or cb is not None:
            w = work.Work(cf or 0.0, cb or 0.0, cb or 0.0, 0.0, "counters x time")
            row.notes.append("family unknown to the model: counters x time")
        row.flops, row.bytes, row.traffic = (w.flops, w.bytes, w.traffic) if w else (None, None, None)

        m = None
        if fam and w and static_rows is not None:
            m = sass.match(fam.base, args, e.parsed.targs, static_rows)
        if w is not None and row.role != "host":
            kind = predict.kind_from_sass(fam, m.row if m else None, args)[0] if fam else (
                "wgmma_f16" if w.flops else "none")
            impl = str(results.contexts.get(e.file, {}).get("flash_impl", ""))
            if e.parsed.base.startswith("SDPA_") and re.search(r"FA[34]", impl):
                kind = "wgmma_f16"  # FlashAttention-3 issues wgmma on Hopper: the datasheet peak
                row.notes.append(f"flash_impl {impl}: wgmma roofline")
            row.roof = predict.roofline(w, gpu, kind)

        if fam and w:
            if static_rows is None:
                row.pred_reason = "no static report"
            else:
                row.pred, row.pred_reason = predict.predict(w, gpu, fam, m, copy_bw)
        else:
            row.pred_reason = "no model for this family"

        if row.roof and row.roof.bound == "memory" and row.traffic and copy and row.time_s and \
                e.parsed.base != pairs.COPY_ANCHOR:
            row.copy_frac = (row.traffic / row.time_s) / copy  # both count bytes read + written
        _find_anchor(row, results.entries, results.errors)
        rows.append(row)
    notes = list(results.notes)
    return Report(rows, results.errors, results.unreadable, gpu, gpu_note, copy_bw, copy_source, static_note, notes)
