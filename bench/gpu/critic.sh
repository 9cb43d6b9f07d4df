# The full-box critic A/B the ablation asked for (README "The ablation"): configs/humanoid.yaml
# (C51) beside its MSE-critic arm, two jobs side by side, each with half the GPU and 7 actors x
# 8 envs, 480 s, one seed (SEED=1): ~560 s. The default critic follows it.
source bench/gpu/setup.sh
timeout 585 python3 bench/humanoid.py --config configs/humanoid.yaml --ablate c51 --seeds ${SEED:-1} \
  --seconds 480 --parallel 2 --set actors.num_actors=7 \
  --out $OUT/critic-ab-s${SEED:-1}-nvidia-h200.json 2>&1 | grep -E "seed [0-9]+:|wrote|rror" | tail -4
python3 bench/ablation.py $OUT/critic-ab-s${SEED:-1}-nvidia-h200.json 2>&1 | tail -4; ls $OUT
