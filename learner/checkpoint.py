"""The learner's checkpoint, written and read here alone: a directory holding

    model.pt   the update's state_dict ("sac"), the counters (updates, received, inserted,
               policy_version) and the learner config ("config", its token left out)
    replay.pt  the ring's rows (run.save_replay; a pixel env's frame replay is never saved)

Written durably and atomically: every file in full under a temporary name and fsynced, then
renamed (replay.pt first), then the directory fsynced; a failed write leaves the previous
checkpoint whole. Read as tensors and plain containers only: unpickling anything else could run
code (CheckpointRefused). The Learner saves and restores through here; the job layer's `herd
evaluate`, `herd export`, `herd.load_policy` and `--resume` read through here
(cluster/checkpoint.py).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from herd.learner.build import build_update, learner_spec
from herd.proto import codec
from herd.proto import herd_pb2 as pb

if TYPE_CHECKING:
    import torch

MODEL, REPLAY = "model.pt", "replay.pt"


class CheckpointRefused(ValueError):
    """A model.pt that is not a plain tensor checkpoint (it would run code if unpickled)."""


def host_copy(x):
    """Tensors (in dicts, lists and tuples) copied to the host: the training thread updates the
    live tensors in place once the model lock is let go."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", copy=True)
    if isinstance(x, dict):
        return {k: host_copy(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(host_copy(v) for v in x)
    return x


def write_checkpoint(directory: str | Path, model: dict, rows: dict | None = None) -> None:
    """model.pt (and replay.pt: `rows`) into `directory`, durably and atomically. A failed write
    (disk full) removes the temporary files and raises OSError (errno, one line)."""
    import torch

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    def one(obj, tmp: Path) -> None:
        failed: list[OSError] = []
        try:
            with open(tmp, "wb") as f:
                class Sink:  # torch reports a failed write only as "unexpected pos": keep it
                    def write(self, b):
                        try:
                            return f.write(b)
                        except OSError as e:
                            failed.append(e)
                            raise

                    def flush(self):
                        f.flush()

                torch.save(obj, Sink())
                f.flush()
                os.fsync(f.fileno())
        except (OSError, RuntimeError) as e:
            cause = failed[0] if failed else e
            raise OSError(getattr(cause, "errno", None),
                          f"checkpoint not written ({tmp.name[:-4]}): "
                          f"{getattr(cause, 'strerror', None) or cause}", str(out)) from None

    # every file written in full before any is renamed: a failure leaves the previous
    # checkpoint's pair as it was
    files = [(model, out / MODEL)]
    if rows is not None:
        files.insert(0, (rows, out / REPLAY))  # renamed first: read_rows checks the pair
    tmps = [final.with_name(final.name + ".tmp") for _, final in files]
    try:
        for (obj, _), tmp in zip(files, tmps):
            one(obj, tmp)
    except OSError:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
        raise
    for (_, final), tmp in zip(files, tmps):
        os.replace(tmp, final)
    fd = os.open(out, os.O_RDONLY)  # the renames themselves survive a power cut
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_model(directory: str | Path, device: torch.device | str = "cpu") -> dict:
    """model.pt of a checkpoint directory, its tensors on `device`; CheckpointRefused for a file
    that holds anything but tensors and plain containers."""
    import torch

    path = Path(directory) / MODEL
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointRefused(f"{path}: refused to load, it holds more than tensors and plain "
                                f"values (not a Herd checkpoint?): {str(e).splitlines()[0]}") from None


def read_rows(directory: str | Path, model: dict) -> tuple[dict | None, str]:
    """replay.pt's rows (memory-mapped) when they are of the same save as `model`, and what
    became of them: 'loaded', 'absent', or why they were skipped. replay.pt is written before
    model.pt: a crash between the two leaves newer rows beside an older model."""
    import torch

    path = Path(directory) / REPLAY
    if not path.exists():
        return None, "absent"
    rows = torch.load(path, mmap=True, weights_only=True)
    if "inserted" in model and int(rows["inserted"]) != int(model["inserted"]):
        return None, "skipped: from a different save than model.pt"
    return rows, "loaded"


def saved_policy(model: dict, spec: pb.EnvSpec) -> pb.PolicyWeights:
    """The policy a checkpoint's model.pt holds, packed (layout, observation statistics) exactly
    as its learner published it: the update its saved config builds for `spec`, loaded from it
    (the averaged actor, with learner.algorithm.actor_ema, as evaluations use)."""
    from herd.learner.config import LearnerConfig

    cfg = LearnerConfig.from_saved(model.get("config", {}), pixels=codec.is_pixel_spec(spec),
                                   device="cpu")  # any earlier layout
    sac = build_update(cfg, learner_spec(cfg, spec), "cpu")
    sac.load_state_dict(model["sac"])
    return sac.policy_weights(int(model.get("policy_version", 0)), averaged=True)
