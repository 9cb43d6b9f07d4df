# A/B of learner.actor_ema on Humanoid seed 2 (the seed with single-evaluation dips), 240 s
# each, one job after the other in this call: ~560 s
source bench/gpu/setup.sh
for ema in 0 0.001; do
  timeout 290 python3 bench/humanoid.py --config configs/humanoid.yaml --set learner.actor_ema=$ema \
    --seeds 2 --seconds 240 --out $OUT/ema$ema-humanoid-s2-nvidia-h200.json 2>&1 | grep -E "seed [0-9]+:|wrote|rror" | tail -3
done
