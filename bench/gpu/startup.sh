# Issue "Start in seconds"'s first update on a fresh box: `herd up --preload` (only the workers
# Ray prestarts preload, and `up` waits for them) beside bare, cold Humanoid, 3 runs each, 30 s
# each (~450 s); also where the driver's imports go there (2.2 s against 0.45 s on the 2-core box):
#   bash bench/gpu/startup.sh
source bench/gpu/setup.sh
python3 -X importtime -c "import herd.driver" 2> $OUT/importtime-driver-nvidia-h200.txt
sort -t'|' -k2 -n $OUT/importtime-driver-nvidia-h200.txt | tail -4
timeout 540 python3 bench/startup.py --config configs/humanoid.yaml --modes cold --preload both \
  --repeat 3 --seconds 30 --out $OUT/startup-warming-nvidia-h200.json 2>&1 \
  | grep -E "median|wrote|rror|Traceback" | tail -14
ls $OUT
