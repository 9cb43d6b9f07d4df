# one GPU call of the ablation (4 runs x 120 s, ~580 s):
#   PIECES=residual bash bench/gpu/ablation.sh; then PIECES=c51,obs_norm NOFULL=1; then PIECES=reward_norm,n_step NOFULL=1
# commit the returned bench/results/ablation-nvidia-h200.* before the next call (it is --append'ed)
source bench/gpu/setup.sh
timeout 585 make bench-ablation PIECES=${PIECES} NOFULL=${NOFULL} PYTHON=python3 2>&1 | grep -E "seed [0-9]+:|wrote|rror|^\|" | tail -20
cp bench/results/ablation-nvidia-h200* $OUT/ 2>/dev/null; ls $OUT
