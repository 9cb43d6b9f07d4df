"""Policies users take away: `load_policy` reads any policy Herd saves or exports, `export_policy`
(`herd export`) writes one as ONNX, TorchScript or safetensors.

    runs/JOB                                        its best policy (best_policy.pb) where one
                                                    was kept, else its latest checkpoint's
    runs/JOB/checkpoint, .../model.pt               the latest checkpoint's actor
    runs/JOB/best_policy.pb                         the best periodic evaluation's (PolicyWeights)
    policy.onnx / policy.torchscript.pt             exported: obs -> (action, mean, log_std)
    policy.safetensors                              exported: the PolicyWeights tensors

Every export carries its facts (env, dims, action bounds, observation statistics, version) in a
JSON document, inside the file (ONNX metadata, TorchScript extra file, safetensors metadata) and
beside it as `<name>.json`. Exported graphs and the actors compute with one module
(herd.actors.policy.PolicyNet), so an exported policy acts as the actors' policy does.
"""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np

from herd.actors.config import EnvConfig

FORMATS = {"onnx": ".onnx", "torchscript": ".torchscript.pt", "safetensors": ".safetensors"}
META_KEY = "herd.json"


class ExportUnavailable(RuntimeError):
    """The package a format needs is not installed here (one `pip install` away)."""


def sidecar(path: Path) -> Path:
    """policy.torchscript.pt -> policy.json (the facts of an export, beside it)."""
    return path.parent / (path.name.split(".")[0] + ".json")


# ---- the policies `load_policy` returns ----
class Policy:
    """A trained policy: `act(obs, deterministic=True)` takes one observation [obs_dim] or a
    batch [N, obs_dim] and returns actions in the env's bounds. `meta` says where it came from
    (env, dims, bounds, version); `env` is the EnvConfig to make its env with. A pixel policy
    (`frame_stack` > 0) takes the stack of an episode's last frames, uint8 [S*C, H, W] (see
    herd.actors.frames.FrameStack), or a batch of them [N, S*C, H, W]."""

    def __init__(self, meta: dict, seed: int | None = None):
        self.meta = meta
        self.env = EnvConfig(**meta["env"])
        self.version = int(meta.get("version", 0))
        self.obs_dim, self.action_dim = int(meta["obs_dim"]), int(meta["action_dim"])
        self.frame_stack = int(meta.get("frame_stack", 0))
        self.obs_shape = tuple(meta.get("obs_shape") or (self.obs_dim,))
        self.low = np.asarray(meta["action_low"], np.float32)
        self.high = np.asarray(meta["action_high"], np.float32)
        self.log_std_range = (meta["log_std_min"], meta["log_std_max"])
        self._rng = np.random.default_rng(seed)

    def act(self, obs, deterministic: bool = True) -> np.ndarray:
        if self.frame_stack:
            obs = np.asarray(obs, np.uint8)
            one = obs.ndim == len(self.obs_shape)
            batch = obs.reshape(-1, *self.obs_shape)
        else:
            obs = np.asarray(obs, np.float32)
            one = obs.ndim == 1
            batch = obs.reshape(1, -1) if one else obs.reshape(obs.shape[0], -1)
        out = self._act(batch, deterministic)
        return out[0] if one else out

    def _act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        action, mean, log_std = self._forward(obs)
        if deterministic:
            return action
        noise = self._rng.standard_normal(mean.shape).astype(np.float32)
        pre = mean + np.exp(np.clip(log_std, *self.log_std_range)) * noise
        return np.tanh(pre) * (self.high - self.low) / 2 + (self.high + self.low) / 2

    def _forward(self, obs: np.ndarray):
        raise NotImplementedError


class WeightsPolicy(Policy):
    """From a PolicyWeights message (checkpoints, best_policy.pb, safetensors): the actors' own
    MLPPolicy."""

    def __init__(self, weights, meta: dict, seed: int | None = None):
        import torch

        from herd.actors.policy import MLPPolicy

        super().__init__(meta, seed)
        self.weights = weights
        self.policy = MLPPolicy(weights, self.low, self.high)
        self._gen = torch.Generator().manual_seed(seed) if seed is not None else None

    def _act(self, obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return self.policy.act(obs, deterministic=deterministic, generator=self._gen)


class TorchScriptPolicy(Policy):
    def __init__(self, path: Path, meta: dict, seed: int | None = None):
        import torch

        super().__init__(meta, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript is deprecated in torch 2.13
            self.module = torch.jit.load(str(path), map_location="cpu")

    def _forward(self, obs):
        import torch

        with torch.inference_mode():
            return tuple(t.numpy() for t in self.module(torch.from_numpy(obs)))


class OnnxPolicy(Policy):
    def __init__(self, path: Path, meta: dict, seed: int | None = None):
        try:
            import onnxruntime
        except ImportError as e:
            raise ExportUnavailable(f"{path}: ONNX policies need onnxruntime: pip install "
                                    f"'herd[export]' ({e})") from None
        super().__init__(meta, seed)
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def _forward(self, obs):
        return tuple(self.session.run(["action", "mean", "log_std"], {"obs": obs}))


# ---- reading ----
def load_policy(path: str | Path, best: bool | None = None, seed: int | None = None,
                working_dir: str | Path | None = None) -> Policy:
    """The policy saved or exported at `path` (see the module docstring for what it may be).
    Of a run directory: its best policy (best_policy.pb) where one was kept, else its latest
    checkpoint; `best=True` the best or FileNotFoundError, `best=False` the latest checkpoint
    (meta["which"] says which it took: "best" or "final"). `seed` seeds the noise
    of act(..., deterministic=False). The env's own package (env.module) is imported from
    `working_dir`, else from where the run's code came from (herd.usercode). FileNotFoundError
    / ValueError say what is wrong."""
    from herd import usercode

    given = [working_dir] if working_dir else []
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{path}: no such file or directory (no checkpoint or policy there)")
    which = None
    if p.is_dir() and not (p / "model.pt").is_file():  # a run directory, not its checkpoint/
        which = "final" if best is False or not (p / "best_policy.pb").is_file() else "best"
        if best and which == "final":
            raise FileNotFoundError(f"{p / 'best_policy.pb'} is missing: no periodic evaluation of "
                                    "that run finished")
        p = p / "best_policy.pb" if which == "best" else p
    if p.is_dir() or p.name == "model.pt":
        from herd.checkpoint import job_env_config, resolve_checkpoint, weights_from_checkpoint

        ckpt = resolve_checkpoint(p.parent if p.name == "model.pt" else p)
        code = usercode.use([*given, *usercode.recorded(ckpt.parent)])
        env_cfg = job_env_config(ckpt)
        weights = weights_from_checkpoint(ckpt, env_cfg)
        return WeightsPolicy(weights, {**weights_meta(weights, env_cfg, str(ckpt), code), "which": which},
                             seed)
    if p.suffix == ".pb":
        from herd.checkpoint import job_env_config
        from herd.proto import herd_pb2 as pb

        try:
            weights = pb.PolicyWeights.FromString(p.read_bytes())
        except Exception as e:  # noqa: BLE001 -- protobuf's DecodeError and kin
            raise ValueError(f"{p}: not a PolicyWeights message ({e})") from None
        code = usercode.use([*given, *usercode.recorded(p.parent)])
        env_cfg = job_env_config(p)  # the run's config.yaml beside it
        return WeightsPolicy(weights, {**weights_meta(weights, env_cfg, str(p), code), "which": which},
                             seed)
    meta = read_meta(p)
    meta = {**meta, "exported_from": meta.get("source"), "source": str(p)}
    meta["code"] = usercode.use([*given, *meta.get("code", [])])
    if p.name.endswith(".safetensors"):
        return WeightsPolicy(weights_from_safetensors(p, meta), meta, seed)
    if p.suffix == ".onnx":
        return OnnxPolicy(p, meta, seed)
    return TorchScriptPolicy(p, meta, seed)


def read_meta(path: Path) -> dict:
    """The facts of an exported policy: inside the file, else the JSON beside it."""
    text = None
    try:
        if path.suffix == ".onnx":
            import onnx

            model = onnx.load(str(path), load_external_data=False)
            text = next((m.value for m in model.metadata_props if m.key == META_KEY), None)
        elif path.name.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(str(path), "np") as f:
                text = (f.metadata() or {}).get(META_KEY)
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                name = next((n for n in z.namelist() if n.endswith("/extra/" + META_KEY)), None)
                text = z.read(name).decode() if name else None
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 -- a damaged or foreign file
        raise ValueError(f"{path}: not a Herd policy export ({type(e).__name__}: {e})") from None
    if text is None and sidecar(path).is_file():
        text = sidecar(path).read_text()
    if text is None:
        raise ValueError(f"{path}: not a Herd policy (expected runs/<job>, a checkpoint, "
                         "best_policy.pb or a `herd export` file with its JSON)")
    return json.loads(text)


def weights_from_safetensors(path: Path, meta: dict):
    from safetensors.numpy import load_file

    from herd.proto import codec

    arrays = load_file(str(path))
    ordered = {name: arrays[name] for name in meta["tensors"]}
    norm = {}
    if meta.get("obs_mean") is not None:
        norm = dict(obs_mean=meta["obs_mean"], obs_std=meta["obs_std"], obs_clip=meta["obs_clip"])
    return codec.pack_weights(ordered, meta["version"], meta["log_std_min"], meta["log_std_max"],
                              arch=meta["arch"], conv_strides=meta.get("conv_strides", ()), **norm)


def weights_meta(weights, env_cfg: EnvConfig, source: str, code: list[str] = ()) -> dict:
    """The facts of a PolicyWeights message for env_cfg (its bounds from one env instance);
    `code`: the folders its env's own package is imported from (herd.usercode)."""
    from herd.actors.envs import describe, make_env
    from herd.proto import codec

    env = make_env(env_cfg)
    try:
        d = describe(env)
    finally:
        env.close()
    tensors = codec.unpack_weights(weights)
    norm = ({"obs_mean": list(weights.obs_mean), "obs_std": list(weights.obs_std),
             "obs_clip": weights.obs_clip} if len(weights.obs_mean) else
            {"obs_mean": None, "obs_std": None, "obs_clip": 0.0})
    stack = int(d.get("frame_stack", 0))
    # a pixel policy reads S frames stacked on the channel axis: [S*C, H, W] uint8
    shape = [stack * d["obs_shape"][0], *d["obs_shape"][1:]] if stack else [int(np.prod(d["obs_shape"]))]
    return {
        "env": env_cfg.model_dump(mode="json"),
        "obs_dim": int(np.prod(shape)),
        "obs_shape": shape,
        "obs_dtype": "uint8" if stack else "float32",
        "frame_stack": stack,
        "conv_strides": list(weights.conv_strides),
        "action_dim": int(np.prod(d["action_shape"])),
        "action_low": d["action_low"].tolist(),
        "action_high": d["action_high"].tolist(),
        "arch": weights.arch or "mlp",
        "version": int(weights.version),
        "log_std_min": weights.log_std_min,
        "log_std_max": weights.log_std_max,
        **norm,
        "tensors": [name for name, _ in tensors],
        "source": source,
        "code": list(code),
        "herd_version": herd_version(),
        "outputs": {"action": "tanh(mean) scaled to [action_low, action_high] (deterministic)",
                    "mean": "pre-tanh Gaussian mean", "log_std": "log std, clamped to [log_std_min, log_std_max]"},
    }


def herd_version() -> str:
    try:
        return metadata.version("herd")
    except metadata.PackageNotFoundError:
        return "unknown"


# ---- writing ----
def export_module(policy: WeightsPolicy):
    """obs [N, obs_dim] float32 (a pixel policy: [N, S*C, H, W] uint8) -> (action, mean,
    log_std) as a torch module (traceable)."""
    import torch

    class Exported(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = policy.policy.net
            self.scale, self.bias = policy.policy.scale, policy.policy.bias
            self.lo, self.hi = policy.log_std_range

        def forward(self, obs):
            mean, log_std = self.net(obs)
            return torch.tanh(mean) * self.scale + self.bias, mean, log_std.clamp(self.lo, self.hi)

    return Exported().eval()


def export_policy(path: str | Path, fmt: str, out: str | Path | None = None, best: bool | None = None,
                  working_dir: str | Path | None = None) -> Path:
    """Write the policy of runs/JOB (or any path load_policy reads, as a PolicyWeights; `best`
    as load_policy's) as `fmt` (onnx, torchscript, safetensors) to `out` (default
    runs/JOB/export/policy<ext>, policy-final<ext> with best=False), with its JSON beside it;
    returns the file written. `working_dir`: as load_policy's."""
    if fmt not in FORMATS:
        raise ValueError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    policy = load_policy(path, best=best, working_dir=working_dir)
    if not hasattr(policy, "weights"):  # ONNX or TorchScript: their graphs are not PolicyWeights
        raise ValueError(f"{path}: already an export; export from runs/<job>, a checkpoint or a .pb")
    if out is None:
        src = Path(path)  # the run's directory: runs/JOB, above checkpoint/ and its files
        run = src.parent if src.is_file() else src
        run = run.parent if (run / "model.pt").is_file() else run
        out = run / "export" / (("policy-final" if best is False else "policy") + FORMATS[fmt])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {**policy.meta, "format": fmt}
    text = json.dumps(meta, indent=1)
    import torch

    example = (torch.zeros(2, *policy.obs_shape, dtype=torch.uint8) if policy.frame_stack
               else torch.zeros(2, policy.obs_dim))
    if fmt == "safetensors":
        try:
            from safetensors.numpy import save_file
        except ImportError as e:
            raise ExportUnavailable(f"safetensors is not installed: pip install 'herd[export]' ({e})") from None
        from herd.proto import codec

        save_file({name: np.ascontiguousarray(a) for name, a in codec.unpack_weights(policy.weights)},
                  str(out), metadata={META_KEY: text})
    elif fmt == "torchscript":
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript is deprecated in torch 2.13
            traced = torch.jit.trace(export_module(policy), example)
            torch.jit.save(traced, str(out), _extra_files={META_KEY: text})
    else:
        try:
            import onnx
        except ImportError as e:
            raise ExportUnavailable(f"ONNX export needs onnx: pip install 'herd[export]' ({e})") from None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
            torch.onnx.export(export_module(policy), (example,), str(out), input_names=["obs"],
                              output_names=["action", "mean", "log_std"],
                              dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"},
                                            "mean": {0: "batch"}, "log_std": {0: "batch"}},
                              dynamo=False)
        model = onnx.load(str(out))
        entry = model.metadata_props.add()
        entry.key, entry.value = META_KEY, text
        onnx.save(model, str(out))
    sidecar(out).write_text(text + "\n")
    plain_mode(out)
    return out


def plain_mode(path: Path) -> None:
    """The mode a new file gets under this process's umask: safetensors writes through a private
    temporary file (0600) that it renames, which would leave the export unreadable to others
    beside its 0644 sidecar."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)
