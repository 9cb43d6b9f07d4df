# learner.compile_options {triton.autotune_pointwise: false} (one Triton config per pointwise
# kernel; configs/humanoid.yaml's setting since session 21) against inductor's defaults, ~5 min:
#   bash bench/gpu/options.sh
# 1. the update's compile alone, cold then warm, each arm in a fresh process with empty caches
#    (bench/compile_profile.py: prepare_s and the phase timers, kernel waits among them);
# 2. what it costs at run time: the compiled update's updates/s at the config's batch, both
#    arms in one call (bench/learner.py; setup_s there is the compile in a process of its own).
# (compile_profile's arm `config` is the config's setting; `inductor` is Inductor's defaults.
# bench/learner.py takes only the networks from the config: its `base` is Inductor's defaults.)
# Then the job itself: ARMS='base inductor' bash bench/gpu/child.sh.
source bench/gpu/setup.sh
OPT='compile_options={"triton.autotune_pointwise":false}'
timeout 300 python3 bench/compile_profile.py --arm "inductor:learner.compile_options={}" \
  --out $OUT/compile-profile-options-nvidia-h200.json 2>&1 | tail -25
learner_rate options-base 200
learner_rate options-fast 200 --set "$OPT"
ls $OUT
