# Issue "Learn like 2026's SAC"'s "not worse than plain SAC on any task", for one task: its config,
# the same config with Humanoid's recipe of session 16 (MSE critic, actor_ema 0.001) and plain SAC,
# one job at a time with the whole box, 120 s each, seed 0 (~480 s):
#   TASK=hopper ENVID=Hopper-v5 bash bench/gpu/tasks.sh
# The recipe arm's config is written to /tmp from configs/$TASK.yaml (the record names it).
source bench/gpu/setup.sh
task=${TASK:-hopper}; envid=${ENVID:-Hopper-v5}
recipe=/tmp/$task-mse-ema.yaml
python3 - configs/$task.yaml $recipe <<'PY' || exit 1
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["learner"].update(critic_loss="mse", actor_ema=0.001)
yaml.safe_dump(cfg, open(sys.argv[2], "w"))
PY
timeout 560 python3 bench/humanoid.py --config configs/$task.yaml --config $recipe \
  --config configs/humanoid-plain.yaml --envs $envid --set run.stop_at_target=false \
  --set run.target_return=null --seconds 120 --out $OUT/tasks-$task-mse-ema-nvidia-h200.json 2>&1 \
  | grep -E "seed [0-9]+:|wrote|rror|Traceback" | tail -8
ls $OUT
