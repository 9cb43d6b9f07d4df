# Rendered frames/s of pixel envs on this node (EGL on the GPU): one process and 15 side by side,
# one env each and 8 each tiled, 3 processes of 40; effects off and on, antialiasing on and off;
# 84 and 128; Walker2d-v5 and dm_control walker (~8 min; ENVS="Walker2d-v5" halves it):
#   bash bench/gpu/render.sh
source bench/gpu/setup.sh
python3 bench/render.py --processes ${PROCESSES:-15} --envs-per-process ${ENVS_PER_PROCESS:-8} \
  --envs ${ENVS:-Walker2d-v5 dm_control/walker-walk-v0} --seconds ${SECONDS_EACH:-3} \
  --out "$OUT/render-$(date -u +%F)-$MACHINE.json"
