"""Deterministic evaluation of a policy on fresh envs (no exploration noise).

`evaluate` takes a published PolicyWeights message (the driver's periodic evaluations) or any
policy with `act(obs, deterministic=True)`; `evaluate_checkpoint` (`herd evaluate PATH`) loads
whatever herd.export.load_policy reads (runs/JOB, a checkpoint, best_policy.pb, an ONNX,
TorchScript or safetensors export) and can record the episodes as an mp4 where offscreen
rendering works.

Beside the return, an env whose step info carries `reward_contact` (Humanoid-v5, Ant-v5: the
contact forces' penalty, <= 0) gets `mean_contact_cost`: the mean over the episodes of the
penalty summed over each episode, as a positive number, so mean_return + mean_contact_cost is
what the same episodes would score without it (Humanoid-v4's returns never charged it: MuJoCo
>= 2.0 left its contact forces at zero). None for an env without one.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from herd.actors.config import EnvConfig
from herd.actors.envs import describe, make_env
from herd.checkpoint import (  # noqa: F401 -- CheckpointRefused, load_checkpoint: callers' names here
    CheckpointRefused,
    load_checkpoint,
    resolve_checkpoint,
    weights_from_checkpoint,
)


class RenderUnavailable(RuntimeError):
    """Offscreen rendering (EGL or OSMesa) or an mp4 encoder is missing here."""


def evaluate(env_cfg: EnvConfig, weights, episodes: int, seed: int = 10_000, video: str | None = None,
             fps: int | None = None) -> dict:
    """Mean/min/max return and mean length of `episodes` deterministic episodes.

    With `video`, the episodes are rendered offscreen and written there as one mp4 (a pixel
    env's: the camera frames the policy acts on; a randomized env's nominal model). Without, a
    randomized env's held-out draws are evaluated too (Evaluator).
    """
    if not video:
        return _evaluate_side_by_side(env_cfg, weights, episodes, seed)
    return _evaluate_video(env_cfg.nominal(), weights, episodes, seed, video, fps)


def is_pixel_env(env_cfg: EnvConfig) -> bool:
    return getattr(env_cfg, "pixels", None) is not None


VIDEO_MIN_SIDE = 256
"""Camera frames (84x84) are scaled up by whole pixels to at least this for watching."""


def _evaluate_video(env_cfg: EnvConfig, weights, episodes: int, seed: int, video: str,
                    fps: int | None) -> dict:
    """The episodes one after the other, written to `video`: a state env rendered offscreen
    before each step; a pixel env's camera frames (the newest of each stack the policy acts on,
    the episode's last one too)."""
    pixels = is_pixel_env(env_cfg)
    if not pixels:
        env_cfg = env_cfg.model_copy(update={"kwargs": {**env_cfg.kwargs, "render_mode": "rgb_array"}})
    env = make_env(env_cfg)
    d = describe(env)
    policy = as_policy(weights, d)
    see = _Observations(int(d.get("frame_stack", 0)), 1)
    if pixels:
        scale = max(1, -(-VIDEO_MIN_SIDE // min(d["obs_shape"][1:])))

        def picture(obs):
            return np.asarray(obs).transpose(1, 2, 0).repeat(scale, 0).repeat(scale, 1)
    else:
        def picture(_obs):
            return env.render()
    returns, lengths, costs, frames = [], [], [], 0
    fps = fps or int(env.metadata.get("render_fps") or 30)
    # frames go to the encoder as they are rendered: held in memory, 5 Humanoid episodes took 3.5 GB
    with mp4_writer(video, fps) as writer:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            x = see.first(0, obs)
            done, total, steps, cost = False, 0.0, 0, None
            while not done:
                writer.append_data(picture(obs))
                frames += 1
                obs, r, term, trunc, info = env.step(policy.act(x[None], deterministic=True)[0])
                x = see.next(0, obs)
                total += float(r)
                steps += 1
                cost = add_contact_cost(cost, info)
                done = term or trunc
            if pixels:  # the episode's last frame
                writer.append_data(picture(obs))
                frames += 1
            returns.append(total)
            lengths.append(steps)
            costs.append(cost)
    env.close()
    return {**summarize(weights, returns, lengths, costs), "video": str(video), "frames": frames}


def _evaluate_side_by_side(env_cfg: EnvConfig, weights, episodes: int, seed: int) -> dict:
    evaluator = Evaluator(env_cfg, episodes, seed)
    try:
        return evaluator.evaluate(weights)
    finally:
        evaluator.close()


HELDOUT = "heldout_"
"""Prefix of the held-out randomizations' figures beside the nominal model's (mean_return ...)."""


def eval_sets(env_cfg: EnvConfig) -> list[tuple[str, EnvConfig]]:
    """What an evaluation runs on, each with the prefix of its figures: the nominal model and,
    for a randomized env, its held-out draws (env.randomize.heldout_seed, none of training's)."""
    heldout = env_cfg.heldout()
    return [("", env_cfg.nominal())] + ([(HELDOUT, heldout)] if heldout is not None else [])


def side_by_side(envs: list, weights, seed: int) -> dict:
    """One deterministic episode per env, all at once (env i reset with seed + i), one policy
    call per step for the envs still running: the evaluation takes as long as its longest
    episode, which keeps the driver's evaluations close together on a busy machine."""
    d = describe(envs[0])
    policy = as_policy(weights, d)
    episodes = len(envs)
    see = _Observations(int(d.get("frame_stack", 0)), episodes)
    obs = [see.first(i, env.reset(seed=seed + i)[0]) for i, env in enumerate(envs)]
    returns, lengths, costs = [0.0] * episodes, [0] * episodes, [None] * episodes
    running = list(range(episodes))
    while running:
        actions = policy.act(np.stack([obs[i] for i in running]), deterministic=True)
        still = []
        for i, action in zip(running, actions):
            o, r, term, trunc, info = envs[i].step(action)
            returns[i] += float(r)
            lengths[i] += 1
            costs[i] = add_contact_cost(costs[i], info)
            obs[i] = see.next(i, o)
            if not (term or trunc):
                still.append(i)
        running = still
    return summarize(weights, returns, lengths, costs)


class _Observations:
    """What the policy reads of each env's observations: flat float32 states, or (frame_stack
    > 0) the stack of a pixel env's last frames."""

    def __init__(self, frame_stack: int, envs: int):
        from herd.actors.frames import FrameStack

        self.stacks = [FrameStack(frame_stack) for _ in range(envs)] if frame_stack else None

    def first(self, i: int, o) -> np.ndarray:
        return self.stacks[i].reset(o) if self.stacks else np.asarray(o, np.float32).ravel()

    def next(self, i: int, o) -> np.ndarray:
        return self.stacks[i].push(o) if self.stacks else np.asarray(o, np.float32).ravel()


def add_contact_cost(cost: float | None, info) -> float | None:
    """The episode's contact cost so far plus this step's (-reward_contact); None while the env
    has reported none."""
    step = info.get("reward_contact") if isinstance(info, dict) else None
    if step is None:
        return cost
    return (cost or 0.0) - float(step)


def as_policy(weights, d: dict):
    """A PolicyWeights message as the actors' policy; a loaded policy (herd.export) as it is."""
    if hasattr(weights, "act"):
        return weights
    from herd.actors.policy import MLPPolicy  # torch: the driver imports this module without it

    return MLPPolicy(weights, d["action_low"], d["action_high"])


class Evaluator:
    """The driver's evaluator (a Ray actor): keeps its envs between evaluations, so each
    periodic evaluation costs its episodes only, not the envs' construction and a fresh task.
    A randomized env is evaluated on its nominal model (mean_return, ...) and on its held-out
    draws (heldout_mean_return, ...): the same draws every evaluation, episode i reset with seed + i."""

    def __init__(self, env_cfg: EnvConfig, episodes: int, seed: int = 10_000):
        self.sets = [(prefix, [make_env(cfg) for _ in range(episodes)]) for prefix, cfg in eval_sets(env_cfg)]
        self.seed = seed

    def evaluate(self, weights) -> dict:
        out: dict = {}
        for prefix, envs in self.sets:
            figures = side_by_side(envs, weights, self.seed)
            out.update(figures if not prefix else
                       {prefix + k: v for k, v in figures.items() if k != "policy_version"})
        return out

    def close(self) -> None:
        for _, envs in self.sets:
            for env in envs:
                env.close()


def summarize(weights, returns: list[float], lengths: list[int], costs: list[float | None]) -> dict:
    """`costs`: each episode's summed contact cost (None: the env reports none)."""
    known = [c for c in costs if c is not None]
    return {
        "policy_version": weights.version,
        "mean_return": float(np.mean(returns)),
        "min_return": float(np.min(returns)),
        "max_return": float(np.max(returns)),
        "mean_length": float(np.mean(lengths)),
        "episodes": len(returns),
        "mean_contact_cost": float(np.mean(known)) if known else None,
    }


def mp4_writer(path: str, fps: int):
    """An imageio mp4 writer (a context manager; append_data(frame) per frame)."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401  (the mp4 encoder imageio uses)
    except ImportError as e:
        raise RenderUnavailable(f"no mp4 encoder: `pip install imageio-ffmpeg` ({e})") from None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=1)


def check_offscreen_rendering(env_cfg: EnvConfig) -> None:
    """RenderUnavailable with the reason when this process cannot render offscreen."""
    if is_pixel_env(env_cfg):  # the env renders its own observations (its GL chosen by make_env)
        return _check_camera(env_cfg)
    gl = offscreen_gl()
    try:
        env = make_env(env_cfg.model_copy(
            update={"kwargs": {**env_cfg.kwargs, "render_mode": "rgb_array", "width": 64, "height": 48}}))
        env.reset(seed=0)
        frame = env.render()
        env.close()
    except Exception as e:  # noqa: BLE001 -- any GL failure means the same to the user
        raise RenderUnavailable(f"offscreen rendering with MUJOCO_GL={gl} failed: "
                                f"{type(e).__name__}: {e}") from None
    if frame is None or np.asarray(frame).ndim != 3:
        raise RenderUnavailable(f"MUJOCO_GL={gl}: the env rendered no frame")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise RenderUnavailable("no mp4 encoder: `pip install imageio-ffmpeg`") from None


OFFSCREEN_GL = ("egl", "osmesa")
"""Tried in this order where MUJOCO_GL names neither, as pixel jobs pick theirs (actors/pixels.py)."""


def offscreen_gl() -> str:
    """The GL a state env's video is rendered with, set in MUJOCO_GL and PYOPENGL_PLATFORM: an
    egl or osmesa MUJOCO_GL already set, else the first of OFFSCREEN_GL that makes a context
    here. Each is tried in a child process: PyOpenGL loads one platform per process, so a
    failed EGL here would leave no OSMesa to fall back to. RenderUnavailable when none works."""
    from herd.actors.pixels import select_gl

    preset = os.environ.get("MUJOCO_GL", "").lower()
    if preset in OFFSCREEN_GL:
        return select_gl(preset)
    failed = []
    for gl in OFFSCREEN_GL:
        why = gl_context_fails(gl)
        if why is None:
            return select_gl(gl)
        failed.append(f"{gl}: {why}")
    raise RenderUnavailable(f"no offscreen OpenGL here ({'; '.join(failed)}); on Debian: apt-get "
                            "install libegl-mesa0 libgl1-mesa-dri libosmesa6")


def gl_context_fails(gl: str) -> str | None:
    """Why a child process cannot make a `gl` context (its error's last line); None when it can."""
    import subprocess
    import sys

    code = f"from mujoco.{gl} import GLContext; c = GLContext(8, 8); c.make_current(); c.free()"
    env = {**os.environ, "MUJOCO_GL": gl, "PYOPENGL_PLATFORM": gl}
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return "no context within 60 s"
    lines = r.stderr.strip().splitlines()
    return None if r.returncode == 0 else (lines[-1] if lines else f"exit {r.returncode}")


def _check_camera(env_cfg: EnvConfig) -> None:
    try:
        env = make_env(env_cfg)
        env.reset(seed=0)
        env.close()
    except Exception as e:  # noqa: BLE001 -- any GL failure means the same to the user
        raise RenderUnavailable(f"the camera of {env_cfg.id} renders no frame here: "
                                f"{type(e).__name__}: {e}") from None
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise RenderUnavailable("no mp4 encoder: `pip install imageio-ffmpeg`") from None


def evaluate_checkpoint(path: str | Path, episodes: int = 5, env_id: str | None = None,
                        video: str | None = None, seed: int = 10_000,
                        working_dir: str | Path | None = None, best: bool | None = None) -> dict:
    """`herd evaluate PATH`: every path herd.export.load_policy reads (of a run directory, its
    best policy unless `best` is False; "which" says which it took). With `env_id`, the
    checkpoint's networks are rebuilt for that env (a run directory without its config.yaml).
    `working_dir`: the folder of the env's own package, as load_policy's."""
    from herd import usercode
    from herd.export import load_policy

    p = Path(path)
    if env_id and (p.is_dir() or p.name == "model.pt"):
        ckpt = resolve_checkpoint(p.parent if p.name == "model.pt" else p)
        usercode.use([working_dir, *usercode.recorded(ckpt.parent)])
        env_cfg = EnvConfig(id=env_id)
        policy, where = weights_from_checkpoint(ckpt, env_cfg), ckpt
        which = "final" if ckpt != p else None
    else:
        policy = load_policy(p, best=best, working_dir=working_dir)
        env_cfg = EnvConfig(id=env_id) if env_id else policy.env
        where, which = policy.meta["source"], policy.meta.get("which")
    if video:
        check_offscreen_rendering(env_cfg)
    out = evaluate(env_cfg, policy, episodes, seed=seed, video=video)
    return {"checkpoint": str(where), "which": which, "env": env_cfg.id, **out}
