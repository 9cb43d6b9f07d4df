# the family's ablation in one GPU call (~450 s): each piece off in turn, seeds 1,2, 120 s per
# run, four jobs side by side (make bench-ablation); more of one piece into a file of its own:
#   PIECES=c51 SEEDS=3,4 SECONDS_BUDGET=240 ABLATION_OUT=bench/results/ablation-c51-240s-par4-nvidia-h200.json
source bench/gpu/setup.sh
out=${ABLATION_OUT:-bench/results/ablation-par4-nvidia-h200.json}
timeout 585 make bench-ablation PIECES=${PIECES:-all} SEEDS=${SEEDS:-1,2} SECONDS_BUDGET=${SECONDS_BUDGET:-120} \
  PARALLEL=${PARALLEL:-4} ABLATION_ACTORS=${ABLATION_ACTORS:-3} ABLATION_OUT=$out PYTHON=python3 2>&1 | grep -E "seed [0-9]+:|wrote|rror|^\|" | tail -20
cp ${out%.json}* $OUT/ 2>/dev/null; ls $OUT
