"""Google Benchmark names: 'BM_Prefill<half>/batch:4/seq:4096/.../manual_time' -> family, template args, args.

A name is the family (with its template arguments, as BENCHMARK_TEMPLATE stringifies them: 'BM_PagedDecode<half,
std::int8_t>'), then one segment per argument ('name:value' with ArgNames, a bare number without), then Google
Benchmark's own segments (manual_time, real_time, iterations:N, ...). Aggregates append '_mean', '_median', ...
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# Segments Google Benchmark adds itself: never benchmark arguments.
GB_KEYS = {"iterations", "repeats", "threads", "min_time", "min_warmup_time"}
GB_FLAGS = {"manual_time", "real_time", "process_time"}
AGGREGATES = ("_mean", "_median", "_stddev", "_cv")


@dataclass(frozen=True)
class BenchName:
    name: str  # as given
    family: str  # 'BM_PagedDecode<half, std::int8_t>'
    base: str  # 'BM_PagedDecode'
    targs: tuple[str, ...]  # ('half', 'std::int8_t')
    named: tuple[tuple[str, int], ...]  # (('batch', 4), ...) in name order
    positional: tuple[int, ...]  # bare numbers, in order
    flags: tuple[str, ...] = field(default=())  # manual_time, iterations:1, ...

    def args(self, arg_names: tuple[str, ...] | list[str] | None = None) -> dict[str, int]:
        """The arguments as a dict; bare numbers take the family's arg names (in order) when given."""
        d = dict(self.named)
        if self.positional:
            names = list(arg_names or [])
            for i, v in enumerate(self.positional):
                d[names[i] if i < len(names) else f"arg{i}"] = v
        return d


def split_template(family: str) -> tuple[str, tuple[str, ...]]:
    """'BM_X<a, b<c, d>>' -> ('BM_X', ('a', 'b<c, d>'))."""
    lt = family.find("<")
    if lt < 0 or not family.endswith(">"):
        return family, ()
    inner = family[lt + 1 : -1]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return family[:lt], tuple(parts)


def strip_aggregate(name: str) -> tuple[str, str | None]:
    """('BM_X/1/manual_time', 'median') for 'BM_X/1/manual_time_median'."""
    for suffix in AGGREGATES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix[1:]
    return name, None


def parse(name: str) -> BenchName:
    run_name, _agg = strip_aggregate(name)
    # the family ends at the first '/' outside the template brackets
    depth, cut = 0, len(run_name)
    for i, ch in enumerate(run_name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "/" and depth == 0:
            cut = i
            break
    family = run_name[:cut]
    base, targs = split_template(family)
    named, positional, flags = [], [], []
    for seg in run_name[cut + 1 :].split("/") if cut < len(run_name) else []:
        if not seg:
            continue
        if seg in GB_FLAGS:
            flags.append(seg)
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*):(-?\d+)", seg)
        if m:
            if m.group(1) in GB_KEYS:
                flags.append(seg)
            else:
                named.append((m.group(1), int(m.group(2))))
            continue
        if re.fullmatch(r"-?\d+", seg):
            positional.append(int(seg))
            continue
        flags.append(seg)  # something this parser does not know: kept, never treated as an argument
    return BenchName(name, family, base, targs, tuple(named), tuple(positional), tuple(flags))


def shape_key(args: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """An order-free key for pairing two benchmarks of the same shape."""
    return tuple(sorted(args.items()))


ABBREV = {"batch": "b", "seq": "s", "heads": "h", "kv_heads": "kvh", "kv_len": "kv", "causal": "c",
          "page_size": "pg", "tokens": "tok"}


def short_shape(args: dict[str, int]) -> str:
    """'b4 s4096 h16 kvh16 d128 c0': the shape column of the printed tables."""
    return " ".join(f"{ABBREV.get(k, k)}{v}" for k, v in args.items())


def full_shape(args: dict[str, int]) -> str:
    return "/".join(f"{k}:{v}" for k, v in args.items())
