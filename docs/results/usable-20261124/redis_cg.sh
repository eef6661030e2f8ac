#!/bin/bash
# instructions redis-server executes for a fixed redis-benchmark load, per allocator
port=16398
for spec in "$@"; do
  label=${spec%%=*}; lib=${spec#*=}
  d=$(mktemp -d)
  env ${lib:+LD_PRELOAD=$lib} valgrind --tool=callgrind --callgrind-out-file=$d/cg.out redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no --dir $d --daemonize no >$d/log 2>&1 &
  pid=$!
  for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
  redis-benchmark -p $port -q -n 20000 -c 1 -r 10000 -d 100 -t set,get,incr,lpush,lpop,sadd,hset >/dev/null 2>&1
  redis-cli -p $port shutdown nosave >/dev/null 2>&1; wait $pid 2>/dev/null
  cp $d/cg.out /tmp/redis_cg.$label.out 2>/dev/null; echo "$label $(grep -h 'Collected' $d/log | awk '{print $4}')"
  rm -rf $d
done
