"""Rendered frames per second of pixel envs (actors/pixels.py) on one node: one process and N
processes side by side (as N actors of a node), effects off and on, antialiasing on and off,
84 and 128 pixels, gymnasium's Walker2d and DeepMind Control's walker.

Each measurement starts `processes` fresh processes (spawned: each picks its GL backend as an
actor does), each with `envs` pixel envs; they step together for --seconds with uniform random
actions (action repeat as in the jobs, episodes reset as they end) and count the frames they
render. Layouts (processes x envs per process, mode):
  step   each env's PixelEnv.step renders its own frame (one glReadPixels per frame)
  tiled  PixelEnv.advance for every env, then render_frames: the process's frames rendered side
         by side in one offscreen buffer and read back at once

    python bench/render.py [--processes 15] [--envs-per-process 8] [--seconds 5] [--quick]

Writes bench/results/render-<date>-<machine>.json: one flat record per measurement.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENVS = ("Walker2d-v5", "dm_control/walker-walk-v0")


def _worker(env_id: str, size: int, effects: bool, antialias: bool, n_envs: int, mode: str,
            action_repeat: int, gl: str, seconds: float, seed: int, barrier, results) -> None:
    import numpy as np

    from herd.actors import pixels
    from herd.actors.config import EnvConfig, PixelConfig
    from herd.actors.envs import make_env

    cfg = EnvConfig(id=env_id, pixels=PixelConfig(size=size, effects=effects, antialias=antialias,
                                                  action_repeat=action_repeat, gl=gl))
    envs = [make_env(cfg) for _ in range(n_envs)]
    rng = np.random.default_rng(seed)
    for i, env in enumerate(envs):
        env.reset(seed=seed * 1000 + i)
    low, high = envs[0].action_space.low, envs[0].action_space.high

    def vector_step() -> int:
        actions = rng.uniform(low, high, (n_envs, *low.shape)).astype(np.float32)
        if mode == "tiled":
            ends = [env.advance(a)[1:3] for env, a in zip(envs, actions, strict=True)]
            pixels.render_frames(envs)
        else:
            ends = [env.step(a)[2:4] for env, a in zip(envs, actions, strict=True)]
        done = [env for env, (term, trunc) in zip(envs, ends, strict=True) if term or trunc]
        for env in done:
            env.reset()
        return n_envs + len(done)

    vector_step()  # the first frames allocate the buffers
    barrier.wait()
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        frames += vector_step()
    results.put((frames, time.perf_counter() - start, pixels.shared_context().backend))


def measure(env_id: str, size: int, effects: bool, antialias: bool, processes: int, n_envs: int, mode: str,
            action_repeat: int, gl: str, seconds: float) -> dict:
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(env_id, size, effects, antialias, n_envs, mode, action_repeat, gl, seconds,
                                               seed, barrier, results), daemon=True)
             for seed in range(processes)]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    rates = [frames / elapsed for frames, elapsed, _ in got]
    total = sum(rates)
    return dict(env=env_id, size=size, effects=effects, antialias=antialias, processes=processes, envs_per_process=n_envs,
                mode=mode, action_repeat=action_repeat, gl=got[0][2], frames_per_s_total=round(total, 1),
                frames_per_s_per_process=round(total / processes, 1), seconds=seconds)


def main() -> None:
    from bench.common import console, header, result_path, save  # torch: not in the spawned workers

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=15, help="processes of the N-process layouts")
    ap.add_argument("--envs-per-process", type=int, default=8, help="envs per process of the tiled layouts")
    ap.add_argument("--layouts", nargs="+", default=None,
                    help="PxE:mode entries (default: 1x1:step Nx1:step 1xE:tiled NxE:tiled, and N/5 "
                         "processes of 5E envs tiled: fewer, larger processes)")
    ap.add_argument("--envs", nargs="+", default=list(ENVS))
    ap.add_argument("--sizes", nargs="+", type=int, default=[84, 128])
    ap.add_argument("--effects", nargs="+", choices=["off", "on"], default=["off", "on"])
    ap.add_argument("--antialias", nargs="+", choices=["on", "off"], default=["on", "off"],
                    help="multisampling; off is measured with effects off only")
    ap.add_argument("--action-repeat", type=int, default=2)
    ap.add_argument("--gl", choices=["auto", "egl", "osmesa"], default="auto", help="env.pixels.gl")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="a short run written under /tmp")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    n, e = args.processes, args.envs_per_process
    layouts = args.layouts or list(dict.fromkeys(
        ["1x1:step", f"{n}x1:step", f"1x{e}:tiled", f"{n}x{e}:tiled", f"{max(1, n // 5)}x{5 * e}:tiled"]))
    info = header("rendered frames/s of pixel envs")
    path = result_path(f"render-{info['date']}", args.out, args.quick)
    records = []
    for env_id in args.envs:
        for size in args.sizes:
            for effects, antialias in [(e, a) for e in args.effects for a in args.antialias
                                       if a == "on" or e == "off"]:
                for layout in layouts:
                    shape, mode = layout.split(":")
                    processes, n_envs = (int(x) for x in shape.split("x"))
                    r = measure(env_id, size, effects == "on", antialias == "on", processes, n_envs, mode,
                                args.action_repeat, args.gl, args.seconds)
                    records.append({**r, **{k: info[k] for k in ("date", "machine", "torch", "cores", "command")}})
                    console.print(f"{env_id:26} {size:4} effects {effects:3} antialias {antialias:3} "
                                  f"{layout:9} {r['gl']:6} "
                                  f"{r['frames_per_s_total']:8.1f} frames/s, {r['frames_per_s_per_process']:.1f} "
                                  "per process", soft_wrap=True)
                    save(records, path)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
