# A/B/C on the cold Humanoid start-up (same call, a fresh cluster and empty compile cache each),
# ~130 s an arm: base = as measured in session 10 (no compile process, no early CUDA context);
# early = + learner.cuda_early; child = + learner.compile_process; nice = child + actors.nice=10;
# nicebase = base + actors.nice=10 (the compile on the learner's thread, the actors yielding the
# cores to it). ARMS="..." picks. The cluster preloads (`--preload on`), as
# `herd up` does on a GPU box since session 18. pyc = base with PYTHONPYCACHEPREFIX=/tmp/pyc, the
# bytecode that bench/gpu/bytecode.sh writes there (run it first in the same call). split2 /
# split4 = base + learner.compile_process with compile_processes 2 / 4 (the frames' compiles
# in that many children at once, learner/compile_proc.py UNITS). Since session 21 the config sets
# learner.compile_options {triton.autotune_pointwise: false}, so base = fast (the setting named
# again); inductor = base with Inductor's defaults (compile_options {}), base before session 21.
source bench/gpu/setup.sh
off="--set learner.compile_process=false --set learner.cuda_early=false"  # base: the compile on the learner's thread, no early CUDA context
n=0
for a in ${ARMS:-child early base}; do
  unset PYTHONPYCACHEPREFIX
  n=$((n+1)); f=$OUT/startup-$a-nvidia-h200.json
  [ -e $f ] && f=$OUT/startup-$a-$n-nvidia-h200.json  # an arm named twice keeps both runs
  case $a in
    a4)    sets="--set actors.num_actors=4 $off" ;;
    fast)  sets="--set learner.compile_options={\"triton.autotune_pointwise\":false} $off" ;;
    base)  sets="$off" ;;
    inductor) sets="--set learner.compile_options={} $off" ;;
    early) sets="--set learner.compile_process=false --set learner.cuda_early=true" ;;
    child) sets="--set learner.compile_process=true --set learner.cuda_early=true" ;;
    nice)  sets="--set learner.compile_process=true --set learner.cuda_early=true --set actors.nice=10" ;;
    nicebase) sets="$off --set actors.nice=10" ;;
    split2) sets="--set learner.compile_processes=2 --set learner.cuda_early=false" ;;
    split4) sets="--set learner.compile_processes=4 --set learner.cuda_early=false" ;;
    pyc)   sets="$off"
           export PYTHONPYCACHEPREFIX=/tmp/pyc ;;
    pycnice) sets="$off --set actors.nice=10"
           export PYTHONPYCACHEPREFIX=/tmp/pyc ;;
  esac
  timeout 180 python3 bench/startup.py --config configs/humanoid.yaml --modes cold --preload on --seconds ${RUN_S:-100} \
    $sets --out $f 2>&1 | grep -E "first update|compile process|done" | tail -3
  python3 -c "
import json; r=json.load(open('$f'))
for x in r: print('$a', {k:x.get(k) for k in ['learner_init_s','learner_torch_s','learner_device_s','learner_listening_s','first_rows_s','first_update_s','actors_ready_s','first_compiled_update_s','capture_s','compile_process_s','graph_swap_s','startup_update_gap_s','startup_update_gap_at_s','max_update_gap_s','eager_updates','seconds_to_5000','disk_read_mb','io_pressure_s','cpu_pressure_s','up_disk_read_mb','up_io_pressure_s','cpu_steal_s','up_cpu_steal_s','cpu_probe_s','cpu_throttled_s','prepare_cpu_s','prepare_compile_s','prepare_kernel_wait_s','prepare_threads_cpu_s']})"
done
