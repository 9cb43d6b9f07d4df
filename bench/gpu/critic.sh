# The full-box critic A/B the ablation asked for (README "The ablation"): configs/humanoid.yaml
# (C51) beside its MSE-critic arm, two jobs side by side, each with half the GPU and 7 actors x
# 8 envs, 480 s, one seed (SEED=1): ~560 s. The default critic follows it.
PIECES=c51 SEEDS=${SEED:-1} SECONDS_BUDGET=480 PARALLEL=2 ABLATION_ACTORS=7 \
  ABLATION_OUT=bench/results/critic-ab-s${SEED:-1}-nvidia-h200.json bash bench/gpu/ablation.sh
