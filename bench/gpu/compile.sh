# Issue "Start in seconds"'s compiled graph within a minute: where the update's cold compile goes
# when it runs alone (bench/compile_profile.py: cold then warm, per arm), ~4 min:
#   bash bench/gpu/compile.sh
source bench/gpu/setup.sh
timeout 560 python3 bench/compile_profile.py --arm 'k1:learner.updates_per_call=1' \
  --arm 'threads1:$TORCHINDUCTOR_COMPILE_THREADS=1' --out $OUT/compile-profile-nvidia-h200.json 2>&1 \
  | tail -30
ls $OUT
