#!/usr/bin/env python3
"""Static performance gates of llmk: the no-GPU proxy for speed.

Reads what the build already compiled (no second nvcc pass): every nvcc object of the compile database, the
ptxas resource report the compiler launcher kept next to it (<object>.ptxas, scripts/perf/nvcc_resource_log.sh)
and the object's SASS (cuobjdump -sass). For every kernel, architecture and build variant (`assert`: tests and
examples, compiled with -UNDEBUG; `ndebug`: benchmarks, what users ship) it reports

  registers, static shared memory, stack frame, spill stores/loads (ptxas), H100 occupancy from the registers,
  the main loops: the innermost loops that hold tensor-core instructions, or, in a kernel without any, the
  innermost loops with cp.async/TMA copies (pipelined loops); summed over them
    tc        the tensor-core instruction kinds (HMMA, IMMA, QMMA, HGMMA, QGMMA, IGMMA, ...)
    n_tc      how many, instr: all instructions (NOP excluded), ipt = instr / n_tc
    ldg       plain global loads (LDG; LDGSTS/TMA are the pipelined copies, not counted)
    ldgsts    cp.async copies (LDGSTS) and TMA copies (UTMALDG/UBLKCP)
    local     local-memory instructions (LDL/STL)

and checks them against the budget file (bench/model/budgets.tsv):

  FAIL  any llmk kernel spills (spill stores or loads > 0), in any variant and on any architecture;
  FAIL  a main loop holds local-memory instructions;
  FAIL  ptxas serialized a kernel's wgmma instructions (its C7510-C7520 "Potential Performance Loss" note in
        the report: every wgmma then waits for the one before, so nothing overlaps the tensor cores);
  FAIL  a budgeted kernel loses its tensor-core instruction kind or its pipelined copies, or exceeds its
        instructions per tensor-core instruction by more than the tolerance (10%), or holds more plain global
        loads in its main loop than budgeted (0 unless the budget file says otherwise);
  FAIL  a kernel matching one of TARGETS (hard ceilings an issue set against an anchor, no tolerance) is over
        its ceiling, or no built kernel matches a target;
  FAIL  a kernel with a main loop has no budget row (a new kernel must be given one: --update), or a budget
        row of a built architecture/variant matches no kernel (stale).

Usage:
  static_gates.py --build-dir build [--budgets FILE] [--report DIR] [--update] [--only REGEX]
  static_gates.py --objects a.o [b.o ...] [--variant ndebug] ...      objects outside a build (gate self-tests)
Exit: 0 all gates pass, 1 a gate fails, 2 usage or tool error.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BUDGETS = ROOT / "bench" / "model" / "budgets.tsv"
TOLERANCE = 0.10  # instructions per tensor-core instruction may grow by this fraction before the gate fails

# Hard ceilings (no tolerance) on instructions per tensor-core instruction: targets an issue set against an
# anchor, checked on every architecture and variant built. (kernel regex, ceiling, why). Every target must match
# at least one built kernel with a main loop, so a renamed kernel cannot drop its target silently.
TARGETS = [
    (r"^attention::prefill_kernel<(half|bfloat16),attention::PrefillConfig<64,128,96,4,2>,"
     r"attention::detail::RaggedKv<", 4.6, "issue 14: d64 prefill at FlashAttention-2's 4.6 or better"),
    (r"^attention::prefill_kernel<(half|bfloat16),attention::PrefillConfig<128,64,96,4,1>,"
     r"attention::detail::RaggedKv<", 3.7, "issue 14: d128 prefill at FlashAttention-2's 3.7 or better"),
    (r"^attention::prefill_kernel<(half|bfloat16),attention::PrefillConfig<256,64,64,4,1>,"
     r"attention::detail::RaggedKv<", 3.0, "issue 14: d256 prefill at FlashAttention-2's 3.0 or better"),
]

# Tensor-core instruction opcodes (the part before the first '.'): Ampere/Ada mma.sync and Hopper wgmma.
TC_OPS = {"HMMA", "IMMA", "QMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA", "OMMA"}
COPY_OPS = {"LDGSTS", "UTMALDG", "UBLKCP", "UTMAPF"}  # asynchronous global -> shared copies
LOCAL_OPS = {"LDL", "STL"}

# H100 (sm_90) occupancy rules: 64 K registers in 256-register warp granules, 64 warps per SM.
SM_REGS, REG_GRANULE, MAX_WARPS = 65536, 256, 64


# ---------------------------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------------------------
def find_tool(name: str) -> str | None:
    """cuobjdump / nvdisasm: on PATH, in the CUDA toolkit, or from the PyPI wheels (nvidia-cuda-cuobjdump)."""
    found = shutil.which(name)
    if found:
        return found
    for base in [os.environ.get("LLMK_PERF_TOOLS", ""), str(ROOT / ".perf-tools"), "/usr/local/cuda/bin"]:
        if not base:
            continue
        for cand in Path(base).rglob(name):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    try:  # a pip install into the running python
        import nvidia  # type: ignore

        for p in nvidia.__path__:
            for cand in Path(p).rglob(name):
                if cand.is_file() and os.access(cand, os.X_OK):
                    return str(cand)
    except ImportError:
        pass
    return None


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    return {n: (lines[i] if i < len(lines) else n) for i, n in enumerate(names)}


# ---------------------------------------------------------------------------------------------------------------
# Inputs: objects and their variants
# ---------------------------------------------------------------------------------------------------------------
def objects_of_build(build_dir: Path) -> list[tuple[Path, str, str]]:
    """(object, variant, source) of every nvcc compile of a .cu in the compile database."""
    db = build_dir / "compile_commands.json"
    if not db.is_file():
        sys.exit(f"static_gates: {db} not found (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)")
    result = []
    for entry in json.loads(db.read_text()):
        cmd = entry.get("command") or " ".join(entry.get("arguments", []))
        src = entry["file"]
        if not src.endswith(".cu") or "nvcc" not in cmd or src.endswith("test_main_cuda.cu"):
            continue
        argv = shlex.split(cmd)
        obj = argv[argv.index("-o") + 1]
        obj_path = Path(entry["directory"]) / obj
        variant = "assert" if "-UNDEBUG" in argv or "-DNDEBUG" not in argv else "ndebug"
        result.append((obj_path, variant, src))
    return result


# ---------------------------------------------------------------------------------------------------------------
# ptxas reports
# ---------------------------------------------------------------------------------------------------------------
RE_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)'")
RE_PROPS = re.compile(r"Function properties for (\S+)")
RE_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
RE_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
# ptxas's C7510-C7520 family: it made every wgmma of the function wait for the previous one (no overlap).
RE_WGMMA_SERIAL = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma\.mma_async instructions are serialized "
                             r"(.*?) in the function '([^']+)'")


def parse_ptxas(text: str) -> dict[tuple[str, str], dict]:
    """(mangled, arch) -> {regs, smem, stack, spill_st, spill_ld} for every entry function."""
    res: dict[tuple[str, str], dict] = {}
    current = None
    arch = None
    props_for = None
    serial_notes: dict[str, str] = {}  # function -> its wgmma serialization note, until its entry header
    for line in text.splitlines():
        m = RE_ENTRY.search(line)
        if m:
            current, arch = m.group(1), m.group(2)
            res[(current, arch)] = {"regs": 0, "smem": 0, "stack": 0, "spill_st": 0, "spill_ld": 0,
                                    "wgmma_serial": serial_notes.pop(current, "")}
            continue
        m = RE_WGMMA_SERIAL.search(line)
        if m:
            # ptxas prints these notes when it starts an architecture, before that pass's entry headers: the note
            # belongs to the named function's next "Compiling entry function"
            serial_notes[m.group(3)] = f"{m.group(1)}: {m.group(2)}"
            continue
        m = RE_PROPS.search(line)
        if m:
            props_for = m.group(1)
            continue
        m = RE_STACK.search(line)
        if m and props_for is not None:
            key = (props_for, arch)
            if key in res:
                res[key].update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            elif props_for != current:  # a device function: its spills are charged to the kernel calling it
                if (current, arch) in res:
                    r = res[(current, arch)]
                    r["spill_st"] += int(m.group(2))
                    r["spill_ld"] += int(m.group(3))
            props_for = None
            continue
        m = RE_USED.search(line)
        if m and (current, arch) in res:
            res[(current, arch)]["regs"] = int(m.group(1))
            if m.group(2):
                res[(current, arch)]["smem"] = int(m.group(2))
    return res


# ---------------------------------------------------------------------------------------------------------------
# SASS
# ---------------------------------------------------------------------------------------------------------------
RE_ARCH = re.compile(r"^\s*arch = (sm_[0-9a-z]+)")
RE_FUNC = re.compile(r"^\s*Function : (\S+)")
RE_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:\{\s*)?(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?\s*([^;]*);")
RE_BRANCH_TARGET = re.compile(r"(0x[0-9a-f]+)\s*$")


def parse_sass(text: str) -> dict[tuple[str, str], list[tuple[int, str, str, str, str]]]:
    """(mangled, arch) -> [(address, opcode, modifiers, operands, predicate)] in address order."""
    funcs: dict[tuple[str, str], list] = {}
    arch = None
    cur = None
    for line in text.splitlines():
        m = RE_ARCH.match(line)
        if m:
            arch = m.group(1)
            cur = None
            continue
        m = RE_FUNC.match(line)
        if m:
            cur = funcs.setdefault((m.group(1), arch), [])
            continue
        if cur is None:
            continue
        m = RE_INSTR.search(line)
        if m:
            cur.append((int(m.group(1), 16), m.group(3), m.group(4) or "", m.group(5).strip(),
                        (m.group(2) or "").strip()))
    return funcs


BRANCH_OPS = ("BRA", "JMP", "BRX", "CALL")  # CALL.REL.NOINC is ptxas's jump out of a loop (no return)
END_OPS = ("EXIT", "RET", "KILL")


def loops(instrs) -> list[list[int]]:
    """The natural loops of the function's control-flow graph, as sorted lists of instruction indices, smallest
    first. A loop is a back edge (a branch to a block that dominates the branching block) plus every block that
    reaches the back edge without passing its header. Unlike an address range [target, branch], this keeps the
    out-of-line blocks ptxas moves a loop's rare paths to (an mbarrier's try-wait retry, placed after the kernel
    body and jumping back) inside their loop, and does not mistake such a jump back for a loop around everything
    between its target and the out-of-line block."""
    n = len(instrs)
    if n == 0:
        return []
    index = {ins[0]: i for i, ins in enumerate(instrs)}

    def target(i):
        m = RE_BRANCH_TARGET.search(instrs[i][3])
        if not m:
            return None
        return index.get(int(m.group(1), 16))

    leaders = {0}
    for i, (_addr, op, _mods, _ops, _pred) in enumerate(instrs):
        if op in BRANCH_OPS or op in END_OPS:
            if i + 1 < n:
                leaders.add(i + 1)
            t = target(i) if op in BRANCH_OPS else None
            if t is not None:
                leaders.add(t)
    starts = sorted(leaders)
    block_of = [0] * n
    blocks = []
    for b, lo in enumerate(starts):
        hi = (starts[b + 1] if b + 1 < len(starts) else n) - 1
        blocks.append((lo, hi))
        for i in range(lo, hi + 1):
            block_of[i] = b
    nb = len(blocks)
    succ = [set() for _ in range(nb)]
    for b, (lo, hi) in enumerate(blocks):
        _addr, op, mods, _ops, pred = instrs[hi]
        predicated = bool(pred) and pred not in ("@PT",)
        falls = hi + 1 < n
        if op in BRANCH_OPS:
            t = target(hi)
            if t is not None:
                succ[b].add(block_of[t])
            # Only a plain, unpredicated BRA to a constant target, or an unpredicated CALL.REL.NOINC, never falls
            # through (BRA.DIV / .CONV and the like are conditional, BRX / JMP may go anywhere, a CALL returns).
            constant = t is not None and RE_BRANCH_TARGET.fullmatch(instrs[hi][3].strip()) is not None
            unconditional = not predicated and constant and (
                (op == "BRA" and not mods) or (op == "CALL" and ".NOINC" in mods))
            if not unconditional and falls:
                succ[b].add(b + 1)
        elif op in END_OPS:
            if predicated and falls:
                succ[b].add(b + 1)
        elif falls:
            succ[b].add(b + 1)
    pred_of = [set() for _ in range(nb)]
    for b in range(nb):
        for c in succ[b]:
            pred_of[c].add(b)
    # Dominators (iterative; block 0 is the entry, unreachable blocks dominate nothing).
    reach = {0}
    stack = [0]
    while stack:
        b = stack.pop()
        for c in succ[b]:
            if c not in reach:
                reach.add(c)
                stack.append(c)
    full = set(reach)
    dom = [set(full) if b in reach else set() for b in range(nb)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in sorted(reach):
            if b == 0:
                continue
            ps = [dom[p] for p in pred_of[b] if p in reach]
            new = set.intersection(*ps) if ps else set()
            new = new | {b}
            if new != dom[b]:
                dom[b] = new
                changed = True
    bodies = {}
    for b in sorted(reach):
        for h in succ[b]:
            if h in dom[b]:  # back edge b -> h
                body = {h}
                work = [b]
                while work:
                    x = work.pop()
                    if x in body:
                        continue
                    body.add(x)
                    work.extend(p for p in pred_of[x] if p in reach)
                bodies.setdefault(h, set()).update(body)  # back edges to one header form one loop
    result = []
    for body in bodies.values():
        result.append(sorted(i for blk in body for i in range(blocks[blk][0], blocks[blk][1] + 1)))
    result.sort(key=len)
    return result


def analyse_function(instrs) -> dict:
    """The main loop and its instruction mix; kernel-wide local-memory and tensor-core counts."""
    def mix(idx):
        c = collections.Counter()
        kinds = set()
        for i in idx:
            _addr, op, _mods, _ops, _pred = instrs[i]
            if op == "NOP":
                continue
            c["instr"] += 1
            if op in TC_OPS:
                c["tc"] += 1
                kinds.add(op)
            elif op == "LDG":
                c["ldg"] += 1
            elif op in COPY_OPS:
                c["copy"] += 1
            elif op in LOCAL_OPS:
                c["local"] += 1
        return c, kinds

    whole, whole_kinds = mix(range(len(instrs))) if instrs else (collections.Counter(), set())
    mixes = [(frozenset(body), *mix(body)) for body in loops(instrs)]

    def innermost(pred):
        # loops satisfying pred that contain no smaller loop satisfying pred
        sel = [x for x in mixes if pred(x)]
        inner = [x for x in sel if not any(y is not x and y[0] < x[0] for y in sel)]
        return inner

    kind = "none"
    mains = innermost(lambda x: x[1]["tc"] > 0)
    if mains:
        kind = "tc"
    else:
        mains = innermost(lambda x: x[1]["copy"] > 0)
        if mains:
            kind = "pipelined"
    res = {
        "loop": kind,
        "kernel_tc": whole["tc"],
        "kernel_tc_kinds": "+".join(sorted(whole_kinds)) or "-",
        "kernel_local": whole["local"],
        "kernel_instr": whole["instr"],
    }
    if not mains:
        res.update(tc="-", n_tc=0, instr=0, ipt=0.0, ldg=0, ldgsts=0, local=0, n_loops=0, loop_range="-")
    else:
        # Every main loop counts (a kernel may have several: the int8 and the fp16 loops of the mixed GEMM, or a
        # loop the compiler duplicated): their instruction mixes add up.
        total = collections.Counter()
        kinds = set()
        for _body, c, k in mains:
            total.update(c)
            kinds |= k
        res.update(
            tc="+".join(sorted(kinds)) or "-",
            n_tc=total["tc"],
            instr=total["instr"],
            ipt=(total["instr"] / total["tc"]) if total["tc"] else 0.0,
            ldg=total["ldg"],
            ldgsts=total["copy"],
            local=total["local"],
            n_loops=len(mains),
            loop_range=",".join(f"{instrs[min(b)][0]:#x}-{instrs[max(b)][0]:#x}" for b, _c, _k in
                                sorted(mains, key=lambda x: min(x[0]))),
        )
    return res


def h100_warps(regs: int, threads: int | None = None) -> int:
    """Warps per SM on H100 limited by registers (and whole blocks when the block size is known)."""
    if regs <= 0:
        return MAX_WARPS
    per_warp = math.ceil(regs * 32 / REG_GRANULE) * REG_GRANULE
    warps = min(MAX_WARPS, SM_REGS // per_warp)
    if threads:
        wpb = math.ceil(threads / 32)
        warps = (warps // wpb) * wpb
    return warps


# ---------------------------------------------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------------------------------------------
BUDGET_COLUMNS = ["kernel", "arch", "variant", "tc", "max_ipt", "max_ldg", "copies", "note"]


def short_name(demangled: str) -> str:
    """The budget key of a kernel: its demangled name without 'void', 'llmk::' and spaces after commas."""
    s = re.sub(r"^void ", "", demangled).replace("llmk::", "")
    return re.sub(r"\s*,\s*", ",", s)


def read_budgets(path: Path) -> dict[tuple[str, str, str], dict]:
    budgets = {}
    if not path.is_file():
        return budgets
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if fields[0] == "kernel":
            continue
        row = dict(zip(BUDGET_COLUMNS, fields + [""] * (len(BUDGET_COLUMNS) - len(fields))))
        budgets[(row["kernel"], row["arch"], row["variant"])] = row
    return budgets


def write_budgets(path: Path, rows: list[dict], old: dict) -> None:
    header = [
        "# Static performance budgets of llmk's kernels, checked by scripts/perf/static_gates.py (docs/performance.md).",
        "# One row per kernel, architecture and build variant (assert: tests/examples with -UNDEBUG; ndebug: benchmarks,",
        "# what users ship). tc: tensor-core instruction kinds required in the main loop ('-': a pipelined loop without",
        "# them); max_ipt: instructions per tensor-core instruction in the main loop (static count; the gate allows",
        "# +10%); max_ldg: plain global loads allowed in the main loop; copies: 1 if the main loop must keep its",
        "# cp.async/TMA copies. Regenerate with `scripts/perf/static_gates.sh --update` and justify every increase",
        "# in the commit message. A note column says why a row is worse than the rule (e.g. LDG still in the loop).",
        "\t".join(BUDGET_COLUMNS),
    ]
    lines = []
    for r in rows:
        key = (r["kernel"], r["arch"], r["variant"])
        note = old.get(key, {}).get("note", "")
        lines.append("\t".join([r["kernel"], r["arch"], r["variant"], r["tc"], f"{r['ipt']:.2f}", str(r["ldg"]),
                                "1" if r["ldgsts"] > 0 else "0", note]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header + sorted(lines)) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------
def load_object(obj: Path, src: str, cuobjdump: str):
    """(ptxas report or None, parsed SASS) of one object."""
    if not obj.is_file():
        sys.exit(f"static_gates: object {obj} (from {src}) not built: build the _cuda targets first")
    report = Path(str(obj) + ".ptxas")
    ptx = parse_ptxas(report.read_text(errors="replace")) if report.is_file() else None
    sass = subprocess.run([cuobjdump, "-sass", str(obj)], capture_output=True, text=True)
    if sass.returncode != 0:
        sys.exit(f"static_gates: cuobjdump -sass {obj} failed: {sass.stderr.strip()}")
    return ptx, parse_sass(sass.stdout)


def collect(objects, cuobjdump, only):
    rows = {}
    missing_reports = []
    jobs = max(1, int(os.environ.get("JOBS", "2")))
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:  # cuobjdump runs in parallel
        loaded = list(pool.map(lambda o: load_object(o[0], o[2], cuobjdump), objects))
    for (obj, variant, src), (ptx, sass) in zip(objects, loaded):
        if ptx is None:
            missing_reports.append(str(obj))
            ptx = {}
        for (mangled, arch), instrs in sass.items():
            key = (mangled, arch, variant)
            if key in rows:
                continue
            r = {"mangled": mangled, "arch": arch.replace("sm_", ""), "variant": variant, "source": src}
            r.update(ptx.get((mangled, arch), {"regs": -1, "smem": -1, "stack": -1, "spill_st": -1, "spill_ld": -1,
                                               "wgmma_serial": ""}))
            r.update(analyse_function(instrs))
            rows[key] = r
    names = demangle(sorted({k[0] for k in rows}))
    out = []
    for r in rows.values():
        r["demangled"] = names[r["mangled"]]
        r["kernel"] = short_name(r["demangled"])
        if only and not re.search(only, r["demangled"]):
            continue
        r["warps_h100"] = h100_warps(r["regs"])
        out.append(r)
    out.sort(key=lambda r: (r["kernel"], r["arch"], r["variant"]))
    return out, missing_reports


def check_targets(rows, targets=None):
    """TARGETS: every matching kernel's main loop at or under its ceiling; every target matched by some kernel."""
    failures = []
    for pattern, ceiling, why in TARGETS if targets is None else targets:
        rx = re.compile(pattern)
        hits = [r for r in rows if r["loop"] != "none" and rx.search(r["kernel"])]
        if not hits:
            failures.append(f"TARGET-MISSING {pattern}: no built kernel with a main loop matches ({why})")
        for r in hits:
            if r["ipt"] > ceiling + 1e-9:
                failures.append(f"TARGET sm_{r['arch']} {r['variant']}: {r['kernel']}: {r['ipt']:.2f} instructions "
                                f"per {r['tc']} > {ceiling} ({why})")
    return failures


def check(rows, budgets, strict_missing=True):
    failures = []
    seen = set()
    built = {(r["arch"], r["variant"]) for r in rows}
    for r in rows:
        where = f"sm_{r['arch']} {r['variant']}: {r['kernel']}"
        if r["spill_st"] > 0 or r["spill_ld"] > 0:
            failures.append(f"SPILL {where}: {r['spill_st']} B spill stores, {r['spill_ld']} B spill loads "
                            f"({r['regs']} registers)")
        if r["spill_st"] < 0:
            failures.append(f"NO-REPORT {where}: no ptxas report for this kernel (was it built with the launcher?)")
        if r["local"] > 0:
            failures.append(f"LOCAL {where}: {r['local']} local-memory instructions (LDL/STL) in the main loop")
        if r.get("wgmma_serial"):
            failures.append(f"WGMMA-SERIAL {where}: ptxas serialized its wgmma instructions ({r['wgmma_serial']})")
        if r["loop"] == "none":
            continue
        key = (r["kernel"], r["arch"], r["variant"])
        b = budgets.get(key)
        if b is None:
            if strict_missing:
                failures.append(f"NO-BUDGET {where}: main loop {r['tc']} ipt {r['ipt']:.2f} ldg {r['ldg']}: add a "
                                f"row to the budget file (--update)")
            max_ldg = 0
            if r["ldg"] > max_ldg:
                failures.append(f"LDG {where}: {r['ldg']} plain global loads in the pipelined main loop (budget 0)")
            continue
        seen.add(key)
        if b["tc"] != "-" and r["tc"] != b["tc"]:
            failures.append(f"TC {where}: main loop tensor-core kind {r['tc']}, budget requires {b['tc']}")
        if b["max_ipt"] not in ("", "-") and b["tc"] != "-":
            limit = float(b["max_ipt"]) * (1 + TOLERANCE)
            if r["ipt"] > limit + 1e-9:
                failures.append(f"IPT {where}: {r['ipt']:.2f} instructions per tensor-core instruction > budget "
                                f"{float(b['max_ipt']):.2f} + 10% ({r['instr']} instr / {r['n_tc']} {r['tc']})")
        if r["ldg"] > int(b["max_ldg"] or 0):
            failures.append(f"LDG {where}: {r['ldg']} plain global loads in the main loop > budget {b['max_ldg']}")
        if b.get("copies") == "1" and r["ldgsts"] == 0:
            failures.append(f"COPIES {where}: the main loop lost its cp.async/TMA copies")
    for key, b in budgets.items():
        if key not in seen and (b["arch"], b["variant"]) in built:
            if strict_missing:
                failures.append(f"STALE sm_{b['arch']} {b['variant']}: {b['kernel']}: budget row matches no kernel "
                                "with a main loop in this build (removed, renamed, or lost its loop/tensor cores)")
    return failures


def print_table(rows, file=sys.stdout):
    hdr = f"{'arch':<6} {'var':<6} {'regs':>4} {'stack':>5} {'spill':>5} {'w/SM':>4} {'loop':<9} {'tc':<6} " \
          f"{'n_tc':>4} {'instr':>5} {'ipt':>6} {'ldg':>3} {'cpy':>3} {'lcl':>3}  kernel"
    print(hdr, file=file)
    for r in rows:
        name = r["kernel"]
        if len(name) > 140:
            name = name[:137] + "..."
        spill = r["spill_st"] + r["spill_ld"] if r["spill_st"] >= 0 else -1
        print(f"sm_{r['arch']:<3} {r['variant']:<6} {r['regs']:>4} {r['stack']:>5} {spill:>5} {r['warps_h100']:>4} "
              f"{r['loop']:<9} {r['tc']:<6} {r['n_tc']:>4} {r['instr']:>5} {r['ipt']:>6.2f} {r['ldg']:>3} "
              f"{r['ldgsts']:>3} {r['local']:>3}  {name}", file=file)


def budgets_markdown(budgets: dict, out: Path) -> None:
    """The budget file as a markdown table (docs/performance-budgets.md), grouped by kernel."""
    by_kernel = collections.defaultdict(list)
    for b in budgets.values():
        by_kernel[b["kernel"]].append(b)
    lines = [
        "# Static performance budgets, kernel by kernel",
        "",
        "Generated from `bench/model/budgets.tsv` by `scripts/perf/static_gates.py --budgets-markdown` (do not edit;",
        "docs/performance.md explains the columns). Per architecture: `variant` assert = tests/examples (-UNDEBUG),",
        "ndebug = benchmarks and users' builds; `tc` = tensor-core instruction kinds required in the main loop;",
        "`ipt` = instructions per tensor-core instruction in the main loop (static SASS count; the gate allows +10%);",
        "`ldg` = plain global loads allowed in the main loop; `copies` = cp.async/TMA copies required there.",
        "",
        "| kernel | arch | variant | tc | ipt | ldg | copies | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kernel in sorted(by_kernel):
        for b in sorted(by_kernel[kernel], key=lambda b: (b["arch"], b["variant"])):
            lines.append(f"| `{kernel}` | sm_{b['arch']} | {b['variant']} | {b['tc']} | {b['max_ipt']} | "
                         f"{b['max_ldg']} | {b['copies']} | {b['note']} |")
    out.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", type=Path)
    ap.add_argument("--objects", nargs="+", type=Path)
    ap.add_argument("--variant", default="ndebug", choices=["assert", "ndebug"], help="variant of --objects")
    ap.add_argument("--budgets", type=Path, default=DEFAULT_BUDGETS)
    ap.add_argument("--report", type=Path, help="write report.tsv / report.json / table.txt here")
    ap.add_argument("--update", action="store_true", help="rewrite the budget file from this build")
    ap.add_argument("--only", help="regex on demangled kernel names")
    ap.add_argument("--all-kernels", action="store_true", help="gate every kernel, not only llmk:: ones")
    ap.add_argument("--exclude", default=r"llmk_planted::|^(void )?\(anonymous namespace\)::",
                    help="regex of kernels the gates skip (default: the planted kernels and the tests' own kernels, "
                         "which live in anonymous namespaces)")
    ap.add_argument("--no-budget-ok", action="store_true", help="kernels without a budget row are not failures")
    ap.add_argument("--budgets-markdown", type=Path, help="write the budget file as a markdown table and exit")
    args = ap.parse_args(argv)
    if args.budgets_markdown:
        budgets_markdown(read_budgets(args.budgets), args.budgets_markdown)
        print(f"== wrote {args.budgets_markdown}")
        return 0

    cuobjdump = find_tool("cuobjdump")
    if not cuobjdump:
        print("static_gates: cuobjdump not found (pip install nvidia-cuda-cuobjdump; scripts/perf/static_gates.sh "
              "installs it)", file=sys.stderr)
        return 2
    if args.objects:
        objects = [(o, args.variant, str(o)) for o in args.objects]
    elif args.build_dir:
        objects = objects_of_build(args.build_dir)
    else:
        ap.error("--build-dir or --objects is required")
    if not objects:
        print("static_gates: no nvcc objects found (LLMK_BUILD_CUDA off?)", file=sys.stderr)
        return 2
    rows, missing_reports = collect(objects, cuobjdump, args.only)
    exclude = re.compile(args.exclude) if args.exclude else None

    def is_llmk(r):
        if exclude and exclude.search(r["demangled"]):
            return False
        return args.all_kernels or "llmk::" in r["demangled"]

    gated = [r for r in rows if is_llmk(r)]
    print(f"== static gates: {len(objects)} objects, {len({r['mangled'] for r in gated})} kernels, "
          f"{len(gated)} kernel x arch x variant rows")
    print_table(gated)
    if args.report:
        args.report.mkdir(parents=True, exist_ok=True)
        keys = ["kernel", "arch", "variant", "regs", "smem", "stack", "spill_st", "spill_ld", "warps_h100", "loop",
                "tc", "n_loops", "n_tc", "instr", "ipt", "ldg", "ldgsts", "local", "kernel_tc", "kernel_tc_kinds",
                "kernel_local", "kernel_instr", "loop_range", "source", "mangled"]
        with open(args.report / "report.tsv", "w") as f:
            f.write("\t".join(keys) + "\n")
            for r in gated:
                f.write("\t".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in keys) + "\n")
        (args.report / "report.json").write_text(json.dumps([{k: r[k] for k in keys} for r in gated], indent=1))
        with open(args.report / "table.txt", "w") as f:
            print_table(gated, f)
    if missing_reports:
        print(f"!! {len(missing_reports)} object(s) without a ptxas report (<object>.ptxas): "
              f"{', '.join(missing_reports[:3])} ... (configure with LLMK_RESOURCE_REPORTS=ON and rebuild)")
    if args.update:
        old = read_budgets(args.budgets)
        looped = [r for r in gated if r["loop"] != "none"]
        # keep rows of architectures/variants this build did not compile
        built = {(r["arch"], r["variant"]) for r in gated}
        keep = [b for k, b in old.items() if (b["arch"], b["variant"]) not in built]
        new_rows = [{"kernel": b["kernel"], "arch": b["arch"], "variant": b["variant"], "tc": b["tc"],
                     "ipt": float(b["max_ipt"] or 0), "ldg": int(b["max_ldg"] or 0),
                     "ldgsts": int(b["copies"] or 0)} for b in keep]
        write_budgets(args.budgets, looped + new_rows, old)
        print(f"== wrote {len(looped) + len(new_rows)} budget rows to {args.budgets}")
        return 0
    budgets = read_budgets(args.budgets)
    failures = check(gated, budgets, strict_missing=not args.no_budget_ok)
    if not args.only and not args.objects:
        failures += check_targets(gated)  # a partial run (--only, --objects) may not build the targets' kernels
    if missing_reports:
        failures.append(f"NO-REPORT {len(missing_reports)} object(s) lack their ptxas report")
    print()
    if failures:
        for f in failures:
            print(f"!! {f}")
        print(f"static gates: FAILED ({len(failures)} finding(s))")
        return 1
    print(f"static gates: PASSED ({len(gated)} rows: no spills, no local memory in main loops, every budgeted main "
          f"loop within its budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
