# The pixel update alone (bench/pixel_learner.py): updates/s of the DrQ-style update on 84x84
# frames at batch 256, one row per learner setting, with each row's longest kernels (~3 min):
#   bash bench/gpu/pixel_learner.sh
source bench/gpu/setup.sh
python3 bench/pixel_learner.py --profile --out "$OUT/pixel-learner-$(date -u +%F)-$MACHINE.json"
