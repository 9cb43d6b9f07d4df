"""The learner process: Ingest -> Replay -> Trainer, wired; weights out; the driver's calls.

`Learner` is a plain class; the job driver runs it as a Ray actor (num_gpus=1 on a GPU box).

    actors ─gRPC─► Ingest: validate, dedup, pack; a thread here (learner/ingest/in_process.py) or, with
                   CUDA, process(es) of its own (learner/ingest/processes.py)
                     └─ take() ─► Trainer (learner/trainer.py: herd-train thread)
                                    ├─ ReplayTable (learner/replay/table.py: ring + limiter)
                                    └─ update ─► WeightPublisher ─► WatchWeights streams

A pixel env (EnvSpec.frame_stack > 0) takes the same path with its own parts: ingest always
here (its batches reach the training thread whole, as validated), FrameTable and FrameReplay
(learner/replay/frames.py: frame numbers -> device slots, stacks gathered by index) and PixelSAC
(learner/update/pixel_sac.py); it publishes PolicyWeights arch "conv". Its frame replay is not saved
in checkpoints (the networks and optimizers are).

torch and the learner's parts are imported in Learner.__init__, not here: the driver imports
this module for the actor class alone, and torch would cost its start-up seconds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from herd.proto import herd_pb2 as pb

if TYPE_CHECKING:
    import torch

    from herd.learner.config import LearnerConfig, ServerConfig
    from herd.learner.ingest.in_process import Ingest
    from herd.learner.ingest.processes import IngestProcess

log = logging.getLogger("herd.learner")


def pick_device(name: str) -> torch.device:
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "learner.compute.device is 'cuda' but this process sees no GPU "
            "(is the learner on a GPU node, and is torch a CUDA build?); "
            "use device: auto to fall back to the CPU"
        )
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def ingest_in_processes(cfg: ServerConfig, cuda: bool, pixels: bool = False) -> bool:
    """Whether ingest runs in processes of its own (learner/ingest/processes.py). Never for a pixel
    env: its batches go to the frame replay whole, which maps frame numbers where it writes."""
    return not pixels and (cfg.ingest_process == "on" or (cfg.ingest_process == "auto" and cuda))


def cuda_likely(name: str) -> bool:
    """pick_device(name) is CUDA, as far as can be told before torch is imported: asked for, or
    auto on a machine with an NVIDIA driver whose GPUs are not all hidden."""
    if name.startswith("cuda"):
        return True
    return (name == "auto" and os.path.exists("/dev/nvidiactl")
            and os.environ.get("CUDA_VISIBLE_DEVICES", "x") != "")


class Learner:
    """Owns and wires the replay table, the trainer, the weight publisher and ingest."""

    def __init__(self, cfg: LearnerConfig, spec: pb.EnvSpec, checkpoint: str | None = None,
                 latest: str | None = None):
        """`checkpoint`: where to start from (a resumed job). `latest`: where this job saves its
        own checkpoints; when one is there (a restart after a crash), it wins over `checkpoint`."""
        from herd.proto.timing import process_started

        # the start-up timeline's learner_* phases (cluster/startup.py), this process's clock
        self.startup_unix = {"process": process_started(), "init": time.time()}
        # ingest processes boot (Python, numpy, gRPC: no torch) while this one imports torch and builds
        # the buffer and the networks; with device auto, on the guess that CUDA is there
        self._starting: IngestProcess | None = None
        if ingest_in_processes(cfg.server, cuda_likely(cfg.compute.device), spec.frame_stack > 0):
            from herd.learner.ingest.processes import IngestProcess

            self._starting = IngestProcess(cfg.server.ingest_processes)
        self._init_error: Exception | None = None
        try:
            self._build(cfg, spec, checkpoint, latest)
        except Exception as e:
            if getattr(self, "trainer", None) is not None:
                self.trainer.stop()
            if self._starting is not None:
                self._starting.stop()
            if not _in_ray_actor():
                raise
            # Kept, not raised: a Ray actor with max_concurrency > 1 whose __init__ raises
            # aborts in Ray's C++ TerminateHandler as its worker exits, and prints that crash
            # above the reason. address() and status_dict() raise it instead, as a task error;
            # the driver then says why in one line and kills this actor.
            self._init_error = e
            return
        self.port = self.ingest.port

    def _started(self) -> None:
        """Raises what stopped __init__, if anything did."""
        if self._init_error is not None:
            raise self._init_error

    def _build(self, cfg: LearnerConfig, spec: pb.EnvSpec, checkpoint: str | None,
               latest: str | None) -> None:
        """The device, the replay table, the networks, the trainer and ingest (its processes
        serving, when it has them: self._starting)."""
        import torch

        from herd.learner.ingest.in_process import Ingest
        from herd.learner.ingest.processes import IngestProcess
        from herd.learner.replay.ring import ReplayBuffer
        from herd.learner.replay.table import RateLimiter, ReplayTable
        from herd.learner.rpc.publisher import WeightPublisher
        from herd.learner.trainer import Trainer
        from herd.learner.update.sac import SAC
        from herd.proto.heap import steady_heap

        self.startup_unix["torch"] = time.time()
        if spec.state_dim and not cfg.encoder.privileged_critic:
            # the critics read the frames: the spec asks the actors for no state (EnvSpec.state_dim)
            frames_only = type(spec)()
            frames_only.CopyFrom(spec)
            frames_only.state_dim = 0
            spec = frames_only
        self.cfg = cfg
        self.spec = spec
        self.learner_id = uuid.uuid4().hex[:12]
        compute, replay, srv = cfg.compute, cfg.replay, cfg.server
        self.device = pick_device(compute.device)
        if compute.compile and compute.compile_options:  # a bad setting fails here, not in a compile later
            from herd.learner.update.sac import compile_kwargs

            compile_kwargs(compute.compile_mode, compute.compile_options)
        torch.set_num_threads(compute.num_threads)
        if self.device.type == "cuda":  # the CUDA context now, so that its cost shows apart
            torch.empty(0, device=self.device)
        self.startup_unix["device"] = time.time()
        steady_heap()  # received batches reuse heap blocks instead of fresh page-faulted maps
        obs_dim = int(np.prod(spec.obs_shape))
        action_dim = int(np.prod(spec.action_shape))
        obs_dtype = getattr(torch, replay.dtype)  # float32, bfloat16 or float16
        layout = dict(obs_shape=tuple(spec.obs_shape), action_dim=action_dim, obs_dtype=obs_dtype,
                      one_step_discount=cfg.algorithm.gamma)
        self.publisher = WeightPublisher()
        server = dict(
            learner_id=self.learner_id, host=srv.host, port=srv.port, token=srv.token,
            max_message_mb=srv.max_message_mb, max_batch=srv.max_batch,
            staging_batches=srv.staging_batches, max_actors=srv.max_actors,
            obs_limit=float(torch.finfo(obs_dtype).max), tls_cert=srv.tls_cert,
            tls_key=srv.tls_key, status=self.status)
        self.pixels = spec.frame_stack > 0
        if ingest_in_processes(srv, self.device.type == "cuda", self.pixels):
            self._starting = self._starting or IngestProcess(srv.ingest_processes)
            self._starting.start(spec, self.publisher, layout, pin=self.device.type == "cuda", **server)
        elif self._starting is not None:  # the guess was wrong: no CUDA
            self._starting.stop()
            self._starting = None
        self.ingest: Ingest | IngestProcess | None = None
        limiter = RateLimiter(replay.ratio, replay.ratio_tolerance, replay.min_size)
        self._ratio_lock, self._wound_down, self._leaving = threading.Lock(), False, 0
        if self.pixels:
            self._build_pixels(cfg, spec, limiter)
        else:
            self.buffer = ReplayBuffer(replay.capacity, device=self.device, **layout)
            self.table = ReplayTable(self.buffer, limiter, chunk_rows=2 * srv.max_batch)
            self.startup_unix["buffer"] = time.time()
            self.sac = SAC(cfg.algorithm, compute, replay.batch_size, obs_dim, action_dim,
                           spec.action_low, spec.action_high, self.device)
        self.startup_unix["sac"] = time.time()
        self.trainer = Trainer(self.sac, self.table, self.publisher, self._take,
                               publish_every_s=srv.publish_every_s, num_threads=compute.num_threads)
        self._model_lock = self.trainer.model_lock
        self._received_base = 0  # accepted by the learner this one was restored from
        self.restarted = _restarted_by_ray()
        self.restored: dict | None = None
        if latest and (Path(latest) / "model.pt").exists():
            checkpoint = latest
        if checkpoint:
            self.restore(checkpoint)
        self._publish()
        # the training thread starts now: on CUDA it captures the uncompiled graph (~1.4 s on
        # the H200) while the ingest processes finish booting; no rows can come before they serve
        self.trainer.start()
        if self._starting is not None:
            self._starting.wait_ready()
        pack = _as_validated if self.pixels else self.buffer.pack_rows
        self.ingest = self._starting or Ingest(spec, self.publisher, pack, **server,
                                               frames=self.buffer.index if self.pixels else None)

    def _build_pixels(self, cfg: LearnerConfig, spec: pb.EnvSpec, limiter) -> None:
        """The frame replay and the pixel SAC (learner/replay/frames.py, learner/update/pixel_sac.py)."""
        from herd.learner.replay.fit import available_bytes, fit_capacity
        from herd.learner.replay.frames import FrameReplay, default_frame_capacity, layout_bytes
        from herd.learner.replay.table import FrameTable
        from herd.learner.update.pixel_teacher import make_pixel_sac

        frame_shape = tuple(spec.obs_shape)
        if len(frame_shape) != 3 or spec.obs_dtype != "uint8":
            raise ValueError(f"a pixel env's obs_shape must be one frame [C, H, W] of uint8; "
                             f"the spec has {frame_shape} {spec.obs_dtype}")
        action_dim = int(np.prod(spec.action_shape))
        fit = fit_capacity(cfg.replay.capacity, lambda n: layout_bytes(
                               n, default_frame_capacity(n), frame_shape, action_dim, spec.state_dim),
                           *available_bytes(self.device, cfg.replay.memory_gib),
                           at_least=cfg.replay.min_size)
        if fit.note:
            log.warning("herd learner: %s", fit.note)
        self.replay_fit = fit
        self.buffer = FrameReplay(fit.capacity, frame_shape, spec.frame_stack, action_dim,
                                  self.device, one_step_discount=cfg.algorithm.gamma,
                                  state_dim=spec.state_dim)
        self.table = FrameTable(self.buffer, limiter)
        self.startup_unix["buffer"] = time.time()
        self.sac = make_pixel_sac(cfg.algorithm, cfg.encoder, cfg.compute, frame_shape,
                                  spec.frame_stack, action_dim, spec.action_low, spec.action_high,
                                  self.device, spec.state_dim)

    def _take(self, limit: int, timeout: float) -> list:
        """Staged blocks for the training thread; none (after `timeout`) while ingest boots."""
        if self.ingest is None:
            time.sleep(timeout or 0.001)
            return []
        return self.ingest.take(limit, timeout)

    # ---- the books restore() and _snapshot() read and write, kept by the components ----
    @property
    def updates(self) -> int:
        return self.trainer.updates

    @updates.setter
    def updates(self, n: int) -> None:
        self.trainer.updates = n

    @property
    def received(self) -> int:
        return self._received_base + (self.ingest.counts()["received"] if self.ingest else 0)

    @received.setter
    def received(self, n: int) -> None:
        self._received_base = n

    @property
    def _base_version(self) -> int:
        return self.trainer.base_version

    @_base_version.setter
    def _base_version(self, v: int) -> None:
        self.trainer.base_version = v

    @property
    def _ratio_base(self) -> int:
        return self.table.limiter.base

    @_ratio_base.setter
    def _ratio_base(self, n: int) -> None:
        self.table.limiter.base = n

    @property
    def servicer(self) -> SimpleNamespace:
        """Accepted transitions per actor_id (`received`), for the fault tests' books."""
        return SimpleNamespace(received=self.ingest.counts()["per_actor"])

    def _publish(self) -> pb.PolicyWeights:
        return self.trainer.publish()

    # ---- control plane (the driver, via Ray) ----
    def address(self) -> str:
        self._started()
        host = self.cfg.server.advertise_host or self.cfg.server.host
        if host in ("0.0.0.0", "::"):
            import ray

            host = ray.util.get_node_ip_address()
        return f"{host}:{self.port}"

    def status_dict(self) -> dict:
        """Counters, rates, losses and memory; the fields of proto LearnerStatus and more."""
        import torch

        from herd.learner.update.sac import LOSS_NAMES

        self._started()
        if self.trainer.error is not None:
            raise RuntimeError(f"learner training thread failed: {self.trainer.error!r}")
        mem = (0, 0)
        if self.device.type == "cuda":
            mem = (torch.cuda.memory_allocated(self.device), torch.cuda.memory_reserved(self.device))
        counts = self.ingest.counts()
        del counts["per_actor"]  # one number per actor: Learner.servicer has them
        return {
            **counts,
            "learner_id": self.learner_id,
            "policy_version": self.publisher.version,
            "updates": self.updates,
            "received": self._received_base + counts["received"],
            "inserted": self.buffer.inserted,
            "replay_size": self.buffer.size,
            "replay_capacity": self.buffer.capacity,
            **self._replay_memory(),
            "updates_per_s": self.trainer.rates[0],
            "inserts_per_s": self.trainer.rates[1],
            "gpu_mem_allocated": mem[0],
            "gpu_mem_reserved": mem[1],
            "device": str(self.device),
            "losses": dict(zip(LOSS_NAMES, self.trainer.losses.tolist())),
            # beyond proto LearnerStatus: for the driver's fault accounting and the soak
            # capture_s, graph_swap_s, eager_updates, first_compiled_unix, graph_error: what the
            # graph cost and when it took over from eager updates (learner/graph/capture.py graph_stats)
            **self.trainer.graph_stats(),
            "pid": os.getpid(),
            "rss_bytes": _rss_bytes(),
            "restarted": self.restarted,
            "restored": self.restored,
            # process, init, torch, device, buffer, sac, first_rows, first_update: unix times
            "startup_unix": {**self.startup_unix, **self.trainer.first_unix},
        }

    def _replay_memory(self) -> dict:
        """replay_bytes_per_transition: the ring's device bytes per row of capacity (a pixel
        env's frames and their margin included; replay_naive_bytes_per_transition: what its
        rows would take with both stacks in each). replay_frame_capacity: frames the frame
        ring holds; replay_capacity_asked: the config's capacity, replay_capacity_note: why the
        capacity is below it (empty: it is not; learner/replay/fit.py). frames_received: frames
        inserted. rows_unresolved: rows dropped because a
        frame they name was unknown or gone; insert_failures: batches whose insert raised,
        rows_failed: their rows (received = inserted + rows_unresolved + rows_failed)."""
        buf = self.buffer
        failed = {"insert_failures": getattr(self.table, "insert_failures", 0),
                  "rows_failed": getattr(self.table, "rows_failed", 0)}
        if not self.pixels:
            return {"replay_bytes_per_transition": buf.nbytes / buf.capacity, "frames_received": 0,
                    "rows_unresolved": 0, **failed}
        fit = self.replay_fit
        return {"replay_capacity_asked": fit.asked, "replay_capacity_note": fit.note or "",
                "replay_bytes_per_transition": buf.bytes_per_transition,
                "replay_naive_bytes_per_transition": buf.naive_bytes_per_transition,
                "replay_frame_capacity": buf.frame_capacity,
                "frames_received": buf.frames_received,
                "rows_unresolved": buf.rows_unresolved, **failed}

    def status(self) -> pb.LearnerStatus:
        fields = pb.LearnerStatus.DESCRIPTOR.fields_by_name
        return pb.LearnerStatus(**{k: v for k, v in self.status_dict().items() if k in fields})

    def weights(self) -> pb.PolicyWeights:
        return self.publisher.wait_newer(0, timeout=0)

    def policy_for_eval(self) -> pb.PolicyWeights:
        """The policy evaluations use: the last published one, or with learner.algorithm.actor_ema the
        averaged actor now (under the version last published)."""
        if self.cfg.algorithm.actor_ema <= 0:
            return self.weights()
        with self._model_lock:
            return self.sac.policy_weights(self.publisher.version, averaged=True)

    def save(self, path: str, save_replay: bool = False) -> str:
        """Durable, atomic checkpoint: model.pt (and replay.pt with save_replay) written under
        temporary names and fsynced, then renamed, then the directory fsynced. A failed write
        (disk full) removes the temporary files and raises OSError (errno, one line); the
        previous checkpoint stays whole and training goes on. Training pauses only for the
        networks' host copy: the rows cross chunk by chunk between updates (RingCopy,
        learner/replay/ring.py) and go to disk outside the lock."""
        self._save(path, save_replay)
        return str(Path(path))

    def save_for_eval(self, path: str) -> pb.PolicyWeights:
        """The full state (no replay) saved to `path`, and the very policy it holds: the driver
        evaluates that policy and, if it is the run's best, keeps `path` as checkpoint-best/."""
        return self._save(path, save_replay=False)

    def _save(self, path: str, save_replay: bool) -> pb.PolicyWeights:
        """`save`; returns the policy the checkpoint holds, as published when it was taken (the
        averaged actor of that moment, with learner.algorithm.actor_ema)."""
        import torch

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        with self._model_lock:  # a consistent snapshot between two updates (copies, see _snapshot)
            # publish these very networks, so the checkpoint's policy_version names them
            weights = self._publish()
            if self.cfg.algorithm.actor_ema > 0:
                weights = self.sac.policy_weights(weights.version, averaged=True)
            state = self._snapshot()
            # the training thread publishes outside the lock, from these same networks
            state["policy_version"] = weights.version
            # the rows as of now; a pixel env's frame replay is not saved (its GBs of frames)
            copy = self.buffer.start_copy() if save_replay and not self.pixels else None
        rows = None
        if copy is not None:
            while copy.remaining:
                with self._model_lock:
                    copy.step()
            rows = copy.result()

        def write(obj, tmp: Path) -> None:
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
        files = [(state, out / "model.pt")]
        if rows is not None:
            files.insert(0, (rows, out / "replay.pt"))  # renamed first: restore() checks the pair
        tmps = [final.with_name(final.name + ".tmp") for _, final in files]
        try:
            for (obj, _), tmp in zip(files, tmps):
                write(obj, tmp)
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
        return weights

    def _snapshot(self) -> dict:
        import torch

        def copied(x):  # the training thread updates the live tensors in place after the lock
            if isinstance(x, torch.Tensor):
                return x.detach().to("cpu", copy=True)
            if isinstance(x, dict):
                return {k: copied(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return type(x)(copied(v) for v in x)
            return x

        return {
            "sac": copied(self.sac.state_dict()),
            "updates": self.updates,
            "received": self.received,
            "inserted": self.buffer.inserted,
            "policy_version": self.publisher.version,
            # no secret in runs/: the token is per job and handed to actors by the driver
            "config": self.cfg.model_dump(exclude={"server": {"token"}}),
        }

    def restore(self, path: str) -> None:
        import pickle

        import torch

        p = Path(path)
        try:  # tensors and plain containers only: unpickling anything else could run code
            state = torch.load(p / "model.pt", map_location=self.device, weights_only=True)
        except pickle.UnpicklingError as e:
            raise ValueError(f"{p / 'model.pt'}: refused to load, it holds more than tensors "
                             f"and plain values (not a Herd checkpoint?): "
                             f"{str(e).splitlines()[0]}") from None
        self.sac.load_state_dict(state["sac"])
        self.updates = int(state["updates"])
        self.received = int(state["received"])
        self._base_version = int(state["policy_version"])
        replay = "absent"
        if (p / "replay.pt").exists():
            rows = torch.load(p / "replay.pt", mmap=True, weights_only=True)
            # replay.pt is written before model.pt: a crash between the two leaves a newer
            # buffer beside an older model. Take the buffer only when both are of one save.
            if "inserted" not in state or int(rows["inserted"]) == int(state["inserted"]):
                self.buffer.load_state_dict(rows)
                replay = "loaded"
            else:
                replay = "skipped: from a different save than model.pt"
                log.warning("%s/replay.pt is not of the same save as model.pt; starting with "
                            "an empty buffer", p)
        if replay != "loaded":
            self._ratio_base = self.updates
        self.restored = {"path": str(p), "updates": self.updates, "received": self.received,
                             "inserted": self.buffer.inserted, "policy_version": self._base_version,
                             "replay": replay}

    def ping(self) -> str:
        return self.learner_id

    def received_by_actor(self) -> dict[str, int]:
        """Transitions accepted from each actor_id (all its processes) by this learner process:
        the driver's books of an actor process that was killed before it could report."""
        return dict(self.servicer.received)

    def wind_down(self) -> None:
        """The job ends: inserts stop waiting for updates (the replay ratio lets go), so that
        actors held back by it deliver what they stepped before they stop."""
        with self._ratio_lock:
            self._wound_down = True
            self._set_ratio()

    def let_go(self, leaving: bool) -> None:
        """Actors are leaving (a scale-down; `leaving` false: they are gone): while any are,
        inserts stop waiting for updates, so that what they stepped goes in before they stop;
        then the replay ratio holds again (the updates catch up with the rows let in)."""
        with self._ratio_lock:
            self._leaving = max(0, self._leaving + (1 if leaving else -1))
            self._set_ratio()

    def _set_ratio(self) -> None:
        let_go = self._wound_down or self._leaving > 0
        self.table.limiter.ratio = None if let_go else self.cfg.replay.ratio

    def stop(self) -> dict:
        """Stop serving and training; what was accepted is inserted before returning."""
        self.ingest.stop(grace=1.0)
        self.trainer.stop()
        self.publisher.close()
        return self.status_dict()


def _as_validated(arrays: dict) -> dict:
    """A pixel batch is staged as validated: the training thread maps its frame numbers."""
    return arrays


def _in_ray_actor() -> bool:
    """True inside a Ray actor's process (not in a driver or a plain process)."""
    try:
        import ray

        return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None
    except (ImportError, RuntimeError, AttributeError):
        return False


def _restarted_by_ray() -> bool:
    """True when Ray restarted this learner actor after it died."""
    if not _in_ray_actor():
        return False
    import warnings

    import ray

    with warnings.catch_warnings():  # the property reads Ray's own deprecated actor_id
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)
    return False


def _rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
