# A running job scaled 40 -> 100 -> 150 real env actors, 60 s at each count: every actor steps and
# the books stay exact (~5 min):
#   bash bench/gpu/scale.sh
source bench/gpu/setup.sh
python3 bench/scale.py --counts 40,100,150 --hold 60 --gap 10 \
  --out "$OUT/scale-$MACHINE.json"
