#!/usr/bin/env bash
# Prints the resident memory of the e2e cluster: every process up.sh
# recorded, the nodes' runc shims and all their descendants (the pods).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
roots=()
for f in "$PIDS"/*.pid; do [[ -f $f ]] && roots+=("$(cat "$f")"); done
for z in "${ZONES[@]}"; do
  roots+=($(pgrep -f -- "-address $(containerd_sock "$z")" || true))
done
ps -e -o pid=,ppid=,rss=,comm= | python3 -c '
import sys
roots = set(int(p) for p in sys.argv[1:])
procs = {}
for line in sys.stdin:
    pid, ppid, rss, comm = line.split(None, 3)
    procs[int(pid)] = (int(ppid), int(rss), comm.strip())
def inside(pid):
    seen = set()
    while pid and pid not in seen:
        if pid in roots: return True
        seen.add(pid); pid = procs.get(pid, (0,))[0]
    return False
by = {}
for pid, (ppid, rss, comm) in procs.items():
    if inside(pid): by[comm] = by.get(comm, 0) + rss
total = sum(by.values())
for comm, rss in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f"{rss/1024:8.0f} MiB  {comm}")
print(f"{total/1024:8.0f} MiB  total")
' "${roots[@]}"
