# What the GPU box's missing bytecode costs `import torch` (the box sets PYTHONDONTWRITEBYTECODE,
# so its torch keeps no .pyc; session 19: 3.4 s bare, 2.0 s with bytecode,
# bench/results/bytecode-nvidia-h200.txt). Times a fresh `import torch` twice as the box is, then
# writes bytecode for the box's site-packages and ours under PYTHONPYCACHEPREFIX=/tmp/pyc (what
# pip does at install time where it may write) and times it twice again. ~1-2 min:
#   bash bench/gpu/bytecode.sh        (child.sh's arm 'pyc' then runs with that prefix)
source bench/gpu/setup.sh
python3 -c "import sys; print('bytecode: dont_write', sys.flags.dont_write_bytecode)"
site=$(python3 -c "import importlib.util, os; print(os.path.dirname(os.path.dirname(importlib.util.find_spec('torch').origin)))")
t() { python3 -c "import time; t=time.perf_counter(); import torch; print('$1 import torch %.2f s' % (time.perf_counter()-t))"; }
t bare1; t bare2
s=$(date +%s.%N)
PYTHONPYCACHEPREFIX=/tmp/pyc python3 -m compileall -q -j 0 "$site" /tmp/site >/tmp/compileall.log 2>&1
echo "compileall of $site and /tmp/site into /tmp/pyc: $(python3 -c "print(round($(date +%s.%N)-$s,1))") s, $(find /tmp/pyc -name '*.pyc' | wc -l) files"
export PYTHONPYCACHEPREFIX=/tmp/pyc; t pyc1; t pyc2; unset PYTHONPYCACHEPREFIX
