# Humanoid-v5 from `herd submit`, cold: eval return against wall-clock for one seed of
# configs/humanoid.yaml, 480 s (~9 min). The published finals are seeds 1, 2, 3:
#   SEED=1 bash bench/gpu/humanoid.sh
source bench/gpu/setup.sh
cold_caches
seed=${SEED:-1}
python3 bench/humanoid.py --config configs/humanoid.yaml --seeds "$seed" --seconds ${SECONDS_BUDGET:-480} \
  --out "$OUT/humanoid-final-fast-s$seed-$MACHINE.json"
python3 bench/plot_results.py
