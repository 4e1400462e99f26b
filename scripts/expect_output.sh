#!/usr/bin/env bash
# expect_output.sh: run a program and pass only if its combined stdout+stderr matches every regex, in order.
#
#   scripts/expect_output.sh [--exit any|nonzero|zero|<code>] -e <regex> [-e <regex>...] -- <program> [args...]
#
# Regexes are POSIX extended regexes (bash [[ =~ ]]), matched line by line: regex i+1 must match on the line where
# regex i matched or on a later line. --exit (default any) also checks the program's exit status.
# Used by llmk_add_planted_test() for the planted-bug programs (a test that expects a failure report).
set -uo pipefail

exit_rule=any
regexes=()
while (($#)); do
  case "$1" in
    -e) regexes+=("$2"); shift 2 ;;
    --exit) exit_rule="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "expect_output.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if ((${#regexes[@]} == 0 || $# == 0)); then
  echo "usage: expect_output.sh [--exit any|nonzero|zero|N] -e REGEX [-e REGEX...] -- PROGRAM [ARGS...]" >&2
  exit 2
fi

output_file=$(mktemp)
trap 'rm -f "$output_file"' EXIT
"$@" >"$output_file" 2>&1 </dev/null
status=$?

fail() {
  echo "----- output of: $* -----"
  cat "$output_file"
  echo "----- end of output (exit status $status) -----"
  echo "expect_output.sh: FAILED: $FAIL_REASON"
  exit 1
}

case "$exit_rule" in
  any) ;;
  nonzero) ((status != 0)) || { FAIL_REASON="expected a non-zero exit status, got 0"; fail "$@"; } ;;
  zero) ((status == 0)) || { FAIL_REASON="expected exit status 0, got $status"; fail "$@"; } ;;
  *) ((status == exit_rule)) || { FAIL_REASON="expected exit status $exit_rule, got $status"; fail "$@"; } ;;
esac

mapfile -t lines <"$output_file"
line_no=0
for re in "${regexes[@]}"; do
  found=-1
  for ((i = line_no; i < ${#lines[@]}; i++)); do
    if [[ ${lines[i]} =~ $re ]]; then found=$i; break; fi
  done
  if ((found < 0)); then
    if ((line_no == 0)); then
      FAIL_REASON="no line matches /$re/"
    else
      FAIL_REASON="no line at or after line $((line_no + 1)) matches /$re/"
    fi
    fail "$@"
  fi
  echo "expect_output.sh: /$re/ matched line $((found + 1)): ${lines[found]}"
  line_no=$found
done
echo "expect_output.sh: all ${#regexes[@]} expectations met (exit status $status)"
exit 0
