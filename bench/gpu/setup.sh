# sourced at the start of every GPU call
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .devwheels/*.whl >/tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 1; }
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 HERD_HOME=/tmp/herdhome
python3 -c "import herd.learner.sac, herd.actors.env_actor, ray, mujoco; print('herd', herd.__file__)" || exit 1
# herd up's default here (on where a GPU shows; it printed True on this box in session 19)
python3 -c "from herd.local import preload_default; print('herd up preloads by default:', preload_default())"
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
