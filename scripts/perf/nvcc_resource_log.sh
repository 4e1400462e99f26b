#!/usr/bin/env bash
# nvcc_resource_log.sh: the CUDA compiler launcher of llmk's own _cuda targets (cmake/llmk_helpers.cmake).
#
#   nvcc_resource_log.sh <compiler command...>      e.g. nvcc_resource_log.sh ccache nvcc ... -c x.cu -o x.cu.o
#
# Runs the command with ptxas's resource report on (-Xptxas=-v) and keeps that report next to the object as
# <object>.ptxas, so the static performance gates (scripts/perf/static_gates.sh) read registers, stack and spills
# of every kernel from the objects the build compiled anyway: no second nvcc pass. The report lines are kept out
# of the build log; every other line of stderr (warnings, errors) passes through. Commands without "-o" (CMake's
# compiler probes, dependency scans) run unchanged.
set -uo pipefail

while (($#)) && [[ -z "$1" ]]; do shift; done  # an empty launcher list entry
obj=""
prev=""
for a in "$@"; do
  [[ "$prev" == "-o" ]] && obj="$a"
  prev="$a"
done
if [[ -z "$obj" || "$obj" != *.o ]]; then
  exec "$@"
fi

report="$obj.ptxas"
tmp="$report.tmp.$$"
"$@" -Xptxas=-v 2>"$tmp"
rc=$?
# ptxas -v: "ptxas info    : ..." lines and the indented "N bytes stack frame, ..." lines.
grep -v -E '^ptxas info|^[[:space:]]+[0-9]+ bytes stack frame' "$tmp" >&2
if ((rc == 0)); then
  mv -f "$tmp" "$report"
else
  rm -f "$tmp" "$report"
fi
exit "$rc"
