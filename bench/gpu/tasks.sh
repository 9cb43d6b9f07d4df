# Issue "Learn like 2026's SAC"'s "not worse than plain SAC on any task", for one task: its config,
# the same config with Humanoid's recipe of session 16 (MSE critic, actor_ema 0.001: an --arm) and
# plain SAC (appended to the same file), one job at a time with the whole box, 120 s each, seed 0
# (~480 s):
#   TASK=hopper ENVID=Hopper-v5 bash bench/gpu/tasks.sh
# ARM='NAME:KEY=VAL;...' tries another arm instead (the file is then tasks-<task>-<NAME>-...).
source bench/gpu/setup.sh
task=${TASK:-hopper}; envid=${ENVID:-Hopper-v5}
arm=${ARM:-'mse-ema:learner.critic_loss=mse;learner.actor_ema=0.001'}
out=$OUT/tasks-$task-${arm%%:*}-nvidia-h200.json
common=(--envs $envid --set run.stop_at_target=false --set run.target_return=null --seconds 120 --out $out)
{ timeout 380 python3 bench/humanoid.py --config configs/$task.yaml \
    --arm "$arm" "${common[@]}" &&
  timeout 180 python3 bench/humanoid.py --config configs/humanoid-plain.yaml --append "${common[@]}"; } 2>&1 \
  | grep -E "seed [0-9]+:|wrote|rror|Traceback" | tail -8
ls $OUT
