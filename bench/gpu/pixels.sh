# DeepMind Control from 84x84 camera frames, from `herd submit`, cold: eval return against
# wall-clock, one job per seed, 300 s each (~6 min a seed with start-up and the final evaluation):
#   SEEDS=1,2,3 bash bench/gpu/pixels.sh
#   CONFIG=configs/cheetah-run-pixels.yaml SEEDS=1 bash bench/gpu/pixels.sh
#   PIXELS=128 SEEDS=1 bash bench/gpu/pixels.sh        # the same task from 128x128 frames
# The node renders through EGL on the GPU: it needs NVIDIA's EGL driver and the GL loader
# libraries (Debian/Ubuntu: libegl1 libopengl0), docs/pixels.md.
source bench/gpu/setup.sh
python3 -m herd up
task=$(basename "${CONFIG:-configs/walker-walk-pixels.yaml}" .yaml)
for seed in ${SEEDS//,/ }; do
  cold_caches
  python3 bench/pixels.py --config "${CONFIG:-configs/walker-walk-pixels.yaml}" --seeds "$seed" \
    --seconds ${SECONDS_BUDGET:-300} ${PIXELS:+--pixels $PIXELS} \
    --out "$OUT/pixels-$(date -u +%F)-$task${PIXELS:+-$PIXELS}-s$seed-$MACHINE.json"
done
