# sourced at the start of every GPU call
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .devwheels/*.whl >/tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 1; }
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 HERD_HOME=/tmp/herdhome
python3 -c "import herd.learner.sac, herd.actors.env_actor, ray, mujoco; print('herd', herd.__file__)" || exit 1
# herd up's default here (on where a GPU shows; it printed True on this box in session 19)
python3 -c "from herd.local import preload_default; print('herd up preloads by default:', preload_default())"
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
# learner_rate NAME TIMEOUT [--set K=V ...]: the compiled update's updates/s at the config's batch
# (bench/learner.py, 5 s), with caches of its own under /tmp/lr-NAME, into $OUT/learner-NAME-nvidia-h200.json
learner_rate() {
  local name=$1 limit=$2; shift 2
  TORCHINDUCTOR_CACHE_DIR=/tmp/lr-$name TRITON_CACHE_DIR=/tmp/lr-$name/triton timeout $limit \
    python3 bench/learner.py --nets configs/humanoid.yaml --rows "amp graph+compile" --batches 1024 \
    --compile-mode default --seconds 5 "$@" --out $OUT/learner-$name-nvidia-h200.json \
    2>&1 | grep -E "updates/s|Error" | tail -3
}
