# one batch size's row of the sweep: BATCH=512 bash bench/gpu/sweep.sh (then 1024, 2048); ~500 s
source bench/gpu/setup.sh
timeout 580 make bench-sweep BATCH=${BATCH} PYTHON=python3 2>&1 | grep -vE "^\s*$" | grep -E "herd tune|compiled|│|wrote|rror" | tail -25
cp bench/results/sweep-humanoid-nvidia-h200.* $OUT/ 2>/dev/null; ls $OUT
