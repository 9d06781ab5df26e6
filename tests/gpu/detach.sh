#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a GPU script longer than one device call (10 minutes at most): the lent machine stays
# held while calls follow each other within its idle release (~30 s), and a job started detached
# keeps running between calls. The first call starts the job, each later call polls it.
#   bash tests/gpu/detach.sh start LOG CMD [ARG...]   CMD detached (own session, no terminal), its
#        stdout and stderr into LOG, its exit status into LOG.rc when it ends
#   bash tests/gpu/detach.sh poll LOG [SECONDS]       prints LOG's lines not printed by an earlier
#        poll, until the job ends or SECONDS (default 540) pass; exit status: the job's when it
#        has ended, 3 while it still runs, 2 when no job was started with that LOG
set -uo pipefail
mode=${1:-}
log=${2:-}
[[ -n "$mode" && -n "$log" ]] || { sed -n '3,12p' "$0" >&2; exit 2; }
case "$mode" in
  start)
    shift 2
    (($#)) || { echo "detach.sh: start needs a command" >&2; exit 2; }
    mkdir -p "$(dirname "$log")"
    rm -f "$log.rc" "$log.off"
    : >"$log"
    # bash -c with the command as positional parameters: no re-quoting of its arguments.
    setsid nohup bash -c '"$@"; echo $? >"$0.rc"' "$log" "$@" >>"$log" 2>&1 </dev/null &
    echo $! >"$log.pid"
    echo "detach.sh: started pid $(cat "$log.pid"), output in $log"
    ;;
  poll)
    [[ -f "$log.pid" ]] || { echo "detach.sh: no job started with $log" >&2; exit 2; }
    limit=${3:-540}
    t0=$(date +%s)
    while :; do
      off=$(cat "$log.off" 2>/dev/null || echo 0)
      size=$(stat -c %s "$log" 2>/dev/null || echo 0)
      if ((size > off)); then
        tail -c +"$((off + 1))" "$log" | head -c "$((size - off))"
        echo "$size" >"$log.off"
      fi
      if [[ -s "$log.rc" ]]; then
        rc=$(cat "$log.rc")
        echo "detach.sh: the job ended with status $rc"
        exit "$rc"
      fi
      if (($(date +%s) - t0 >= limit)); then
        echo "detach.sh: still running after ${limit} s of this poll (pid $(cat "$log.pid"))"
        exit 3
      fi
      sleep 5
    done
    ;;
  *) echo "detach.sh: unknown mode '$mode' (start, poll)" >&2; exit 2 ;;
esac
