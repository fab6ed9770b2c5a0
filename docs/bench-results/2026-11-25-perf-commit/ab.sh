#!/bin/bash
cd /tmp
# usage: ab.sh NAME_A ROOT_A NAME_B ROOT_B PAIRS [bench args...]
A=$1; RA=$2; B=$3; RB=$4; N=$5; shift 5
for i in $(seq 1 $N); do
  for pair in "$A:$RA" "$B:$RB"; do
    name=${pair%%:*}; root=${pair#*:}
    echo "== $name pair $i $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    H2ROOT=$root timeout 300 /work/wt/perf-commit/.venv/bin/python /tmp/h2/recv.py "$@" 2>&1 | grep -E "msgs/commit|  receive-|per-thread" | grep -v "commits 0 "
  done
done
