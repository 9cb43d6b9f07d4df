# One final seed of configs/humanoid.yaml, 480 s, cold (issue "Learn like 2026's SAC"'s targets:
# 5,000 within 80k updates, 10,000 within 8 minutes of herd submit, no evaluation < 4,000 after
# 5,000): SEED=k bash bench/gpu/final.sh, one call per seed (~560 s). The compile caches are
# emptied first, so a call that finds the machine warm from the call before still starts cold.
source bench/gpu/setup.sh
rm -rf /tmp/torchinductor_$(whoami) ~/.triton/cache ~/.cache/torch/inductor 2>/dev/null
out=$OUT/humanoid-final-${FINAL_TAG:+$FINAL_TAG-}s${SEED:-1}-nvidia-h200.json
timeout 575 python3 bench/humanoid.py --config configs/humanoid.yaml --seeds ${SEED:-1} --seconds 480 \
  --out $out 2>&1 | grep -E "seed [0-9]+:|wrote|rror|Traceback" | tail -8
ls $OUT
