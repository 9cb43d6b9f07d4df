# one seed's 3 x 3 grid of the sweep: SEED=1 bash bench/gpu/sweep.sh (then 2, 3); ~520 s
source bench/gpu/setup.sh
timeout 555 make bench-sweep SEED=${SEED:-1} PYTHON=python3 2>&1 | grep -vE "^\s*$" | grep -E "herd tune|precompile|seed [0-9]+: |mean final|wrote|rror" | tail -25
cp bench/results/sweep-humanoid-nvidia-h200.* $OUT/ 2>/dev/null; ls $OUT
