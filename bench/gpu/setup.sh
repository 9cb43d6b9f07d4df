# sourced at the start of every GPU call
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .devwheels/*.whl >/tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 1; }
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 HERD_HOME=/tmp/herdhome
python3 -c "import herd.learner.sac, herd.actors.env_actor, ray, mujoco; print('herd', herd.__file__)" || exit 1
# herd up's default here (session 18: on where a GPU shows; not yet seen on this box)
python3 -c "from herd.local import preload_default; print('herd up preloads by default:', preload_default())"
# why `import torch` took 8-10 s in every fresh process here (compile-profile-nvidia-h200.json)
# against ~2 s on the 2-core box: is bytecode written and kept? (--no-compile above skips .pyc
# for our wheels; torch is the box's own)
python3 -c "
import importlib.util, os, sys
t = os.path.dirname(importlib.util.find_spec('torch').origin)
print('bytecode: dont_write', sys.flags.dont_write_bytecode, 'torch at', t,
      'pycache', os.path.isdir(os.path.join(t, '__pycache__')), 'writable', os.access(t, os.W_OK))"
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
