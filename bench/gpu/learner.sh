# The learner's update alone: updates/s of the compiled, graphed update with AMP, for plain SAC
# and configs/humanoid.yaml's networks at batch 512 and 2048 (~4 min):
#   bash bench/gpu/learner.sh
source bench/gpu/setup.sh
python3 bench/learner.py --nets plain,configs/humanoid.yaml --rows 'amp graph+compile' --batches 512,2048 \
  --compile-mode default --out "$OUT/learner-nets-mse-512-2048-$MACHINE.json"
