# Sourced by the other scripts here: Herd from the wheelhouse that `make offline-wheels` built
# (no network needed), results into $OUT (default: bench/results), a Herd home of its own.
#   WHEELHOUSE=wheelhouse   where the wheels are (copied to the box beside the clone)
#   EXTRAS=export,bench     the extras the wheelhouse was built with
set -eo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
WHEELHOUSE=${WHEELHOUSE:-wheelhouse}
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
if ! python3 -c "import herd.learner.build, herd.learner.update.sac, herd.actors.env_actor, ray, mujoco, dm_control, OpenGL" 2>/dev/null; then
  [ -d "$WHEELHOUSE" ] || { echo "no $WHEELHOUSE/: run 'make offline-wheels' where pip reaches an index, copy it here"; exit 1; }
  if ls "$WHEELHOUSE"/torch-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --find-links "$WHEELHOUSE" "herd[${EXTRAS:-export,bench}]"
  else  # built with NO_TORCH=1: the node's own torch stays
    python3 -m pip install -q --no-index --no-deps "$WHEELHOUSE"/*.whl
  fi
fi
export PYTHONUNBUFFERED=1 HERD_HOME=${HERD_HOME:-/tmp/herdhome}
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader 2>/dev/null || true
MACHINE=$(python3 -c "from bench.common import machine_name, slug; print(slug(machine_name()))")  # nvidia-h200

# Empty the compile caches, so a run is cold even where an earlier run warmed them.
cold_caches() { rm -rf /tmp/torchinductor_"$(whoami)" ~/.triton/cache ~/.cache/torch/inductor 2>/dev/null || true; }
