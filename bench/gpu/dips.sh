# The no-dip target's test bed (issue "Learn like 2026's SAC"): at a quarter of the box, in 240-s runs,
# every arm of session 14's ablation that reached 5,000 dipped below 4,000 after it (the MSE
# critic's seeds 3 and 4 to 1,564 and 2,263), so a fix shows here in one call.
# configs/humanoid.yaml beside ARMS (default: actor_ema 0.001, about a 5-s average at a quarter
# box's ~200 updates/s), seeds 3,4, 360 s, four jobs side by side: ~470 s. 360 s, not 240: the
# quarter box dips in ~5% of the evaluations after 5,000, so an arm needs ~100 of them (two
# seeds) for 'no dip' to mean something (0 of 100 by luck at a 5% rate: ~0.6%).
#   ARMS='ema:learner.actor_ema=0.001' SEEDS=3,4 bash bench/gpu/dips.sh
source bench/gpu/setup.sh
out=$OUT/dips-${ARMS_TAG:-ema}-par4-nvidia-h200.json
arms=(); IFS=' ' read -ra specs <<< "${ARMS:-ema:learner.actor_ema=0.001}"
for a in "${specs[@]}"; do arms+=(--arm "$a"); done
timeout 560 python3 bench/humanoid.py --config configs/humanoid.yaml "${arms[@]}" --seeds ${SEEDS:-3,4} \
  --seconds 360 --parallel 4 --set actors.num_actors=3 --out $out 2>&1 | grep -E "seed [0-9]+:|wrote|rror|Traceback" | tail -8
ls $OUT
