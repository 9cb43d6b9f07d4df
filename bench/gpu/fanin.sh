# One learner, a thousand actors: 1,000 synthetic gRPC clients with one weight relay per process,
# paced and flat out, against the update rate alone (~3 min):
#   bash bench/gpu/fanin.sh
source bench/gpu/setup.sh
python3 bench/fanin.py --clients 1000 --relay --ingest-processes 4 --procs 8 \
  --config configs/humanoid-plain.yaml --out "$OUT/fanin-1000-ip4-$MACHINE.json"
