#!/bin/bash
# usage: node_perf.sh LOGDIR OUT SECS -- perf record the learner node once it steps
logdir=$1; out=$2; secs=${3:-30}
pid=""
while [ -z "$pid" ]; do
  sleep 2
  for p in $(pgrep -f process_entry.py); do
    if [ -r /proc/$p/environ ] && ! tr '\0' '\n' < /proc/$p/environ | grep -q "xla_cpu_multi_thread_eigen=false"; then pid=$p; fi
  done
done
echo "learner pid $pid"
while ! ls $logdir/*/learner.csv >/dev/null 2>&1 || [ $(cat $logdir/*/learner.csv | wc -l) -lt 5 ]; do sleep 2; done
sleep 20
.venv/bin/python $(dirname "$0")/procstat.py $pid 1 > /dev/null
perf record -F 999 -p $pid -o $out.data -- sleep $secs 2>/dev/null >/dev/null &
.venv/bin/python $(dirname "$0")/procstat.py $pid $secs > $out.procstat.json
wait
echo done
