# Cold start-up of configs/humanoid.yaml on a preloaded cluster: first update, all actors stepping,
# the compiled graph taking over and the update stream's longest pause, RUNS runs of RUN_S s each,
# a fresh cluster and empty compile caches every run (~2 min a run):
#   RUNS=3 bash bench/gpu/startup.sh
source bench/gpu/setup.sh

for n in $(seq 1 "${RUNS:-3}"); do
  cold_caches
  python3 bench/startup.py --config configs/humanoid.yaml --modes cold --preload on --seconds ${RUN_S:-90} \
    --out "$OUT/startup-$(date -u +%F)-base-$n-$MACHINE.json"
done
