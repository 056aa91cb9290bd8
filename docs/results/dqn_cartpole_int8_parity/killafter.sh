#!/bin/bash
# killafter.sh LOG PATTERN LOGD: stops the stream whose sweep uses LOGD once LOG shows PATTERN
# (its remaining runs were started as their own streams, drive8.sh).
until grep -q "$2" "$1"; do sleep 10; done
p=$(pgrep -f "logdir /work/sweeps/parity/$3( |$)" | head -1)
[ -n "$p" ] && kill -- -$(ps -o pgid= -p $p | tr -d ' ') && echo "$(date +%T) stopped $3 after $2"
