# The set-up scripts' steps, sourced by scripts/bootstrap.sh and scripts/install-*.sh.
#
# Why: a fresh machine's set-up runs apt, pip and Maven, which print hundreds of lines of
# progress that nobody reads and that push the demo's first line off the screen. Each step
# prints ONE line (its name, what it downloaded, its time); the tools' own output goes to a log
# file, and only when a step fails is the end of its output shown, with the step's name and
# the log's path. A step with nothing to do prints a short "up to date" line.
#
#   STEP_PREFIX=bootstrap; source scripts/steps.sh
#   step "label" command args...              run it quietly, one line when done
#   step --size-of PATH "label" command...    ... and report PATH's size as what it downloaded
#   apt_install package...                    apt-get update (once per set-up) and install
#   apt_update_once                           apt-get update, unless this set-up ran it
#   up_to_date "label" [detail]               the line of a step that had nothing to do
#
# The log: $HUDI_OCC_SETUP_LOG, default .work/bootstrap.log in the checkout (appended to, one
# "=== prefix: label" header per step). The lines of a failed step's output shown:
# $HUDI_OCC_SETUP_TAIL (default 30).

STEP_PREFIX=${STEP_PREFIX:-bootstrap}
_steps_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export HUDI_OCC_SETUP_LOG=${HUDI_OCC_SETUP_LOG:-$_steps_root/.work/bootstrap.log}
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# What a step downloaded, from its part of the log: apt's "Need to get 12.3 MB of archives",
# pip's "Downloading x.whl (4.5 MB)"; or the size of --size-of's path. Empty when nothing.
_steps_downloaded() {  # offset [path]
  local bytes
  bytes=$(tail -c +"$(($1 + 1))" "$HUDI_OCC_SETUP_LOG" | awk '
    function b(n, u) { gsub(",", "", n); return n * (u ~ /^k/ ? 1e3 : u ~ /^M/ ? 1e6 : u ~ /^G/ ? 1e9 : 1) }
    /Need to get [0-9.,]+ [kMG]?B/ { for (i = 1; i < NF; i++) if ($i == "get") { s += b($(i+1), $(i+2)); break } }
    /Downloading .*\([0-9.]+ [kMG]?B\)/ { n = $(NF-1); u = $NF; sub(/^\(/, "", n); sub(/\)$/, "", u); s += b(n, u) }
    END { printf "%d", s }')
  if [ -n "${2:-}" ] && [ -e "$2" ]; then
    bytes=$(du -sb "$2" | cut -f1)
  fi
  if [ "${bytes:-0}" -gt 0 ]; then
    awk -v b="$bytes" 'BEGIN { m = b / 1e6; if (m < 10) printf "%.1f MB", m; else printf "%d MB", m }'
  fi
}

step() {  # [--size-of PATH] label command args...
  local size_of=""
  if [ "$1" = "--size-of" ]; then size_of=$2; shift 2; fi
  local label=$1; shift
  mkdir -p "$(dirname "$HUDI_OCC_SETUP_LOG")"
  touch "$HUDI_OCC_SETUP_LOG"
  local offset; offset=$(stat -c %s "$HUDI_OCC_SETUP_LOG")  # the step's part begins after it
  printf '\n=== %s: %s (%s)\n' "$STEP_PREFIX" "$label" "$(date -u +%FT%TZ)" >>"$HUDI_OCC_SETUP_LOG"
  local t0=$SECONDS rc=0 flags=$-
  # a subshell outside any && / || list, so that `set -e` stops the step at its first failure
  set +e
  (set -e; "$@") >>"$HUDI_OCC_SETUP_LOG" 2>&1 </dev/null
  rc=$?
  if [[ $flags == *e* ]]; then set -e; fi
  local secs=$((SECONDS - t0))
  if [ "$rc" -ne 0 ]; then
    {
      echo "$STEP_PREFIX: $label FAILED (exit $rc, after $secs s); the end of its output:"
      tail -c +"$((offset + 2))" "$HUDI_OCC_SETUP_LOG" | tail -n "${HUDI_OCC_SETUP_TAIL:-30}" | sed 's/^/  | /'
      echo "$STEP_PREFIX: $label failed; its whole output is in $HUDI_OCC_SETUP_LOG"
    } >&2
    return "$rc"
  fi
  local size; size=$(_steps_downloaded "$offset" "$size_of")
  echo "$STEP_PREFIX: $label${size:+  $size}  $secs s"
}

up_to_date() {  # label [detail]
  echo "$STEP_PREFIX: $1 up to date${2:+ ($2)}"
}

apt_update_once() {
  if [ -z "${HUDI_OCC_APT_UPDATED:-}" ]; then
    step "apt-get update" $SUDO apt-get update -q
    export HUDI_OCC_APT_UPDATED=1  # the scripts bootstrap runs next need not update again
  fi
}

apt_install() {  # package...
  apt_update_once
  step "apt-get install$(printf ' %s' "$@")" $SUDO apt-get install -y -q "$@"
}
