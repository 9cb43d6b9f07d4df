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

from herd.learner.build import (
    build_ring,
    build_table,
    build_update,
    cuda_likely,
    ingest_in_processes,
    learner_spec,
    pick_device,
    row_layout,
)
from herd.learner.checkpoint import host_copy, read_model, read_rows, write_checkpoint
from herd.proto import herd_pb2 as pb

if TYPE_CHECKING:

    from herd.learner.config import LearnerConfig
    from herd.learner.ingest import Ingest
    from herd.learner.ingest.processes import IngestProcess

log = logging.getLogger("herd.learner")


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

        from herd.learner.ingest.in_process import InProcessIngest
        from herd.learner.ingest.processes import IngestProcess
        from herd.learner.rpc.publisher import WeightPublisher
        from herd.learner.trainer import Trainer
        from herd.proto.heap import steady_heap

        self.startup_unix["torch"] = time.time()
        self.cfg = cfg
        self.spec = spec = learner_spec(cfg, spec)
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
        self.publisher = WeightPublisher()
        server = dict(
            learner_id=self.learner_id, host=srv.host, port=srv.port, token=srv.token,
            max_message_mb=srv.max_message_mb, max_batch=srv.max_batch,
            staging_batches=srv.staging_batches, max_actors=srv.max_actors,
            obs_limit=float(torch.finfo(getattr(torch, replay.dtype)).max), tls_cert=srv.tls_cert,
            tls_key=srv.tls_key, status=self.status)
        self.pixels = spec.frame_stack > 0
        if ingest_in_processes(srv, self.device.type == "cuda", self.pixels):
            self._starting = self._starting or IngestProcess(srv.ingest_processes)
            self._starting.start(spec, self.publisher, row_layout(cfg, spec),
                                 pin=self.device.type == "cuda", **server)
        elif self._starting is not None:  # the guess was wrong: no CUDA
            self._starting.stop()
            self._starting = None
        self.ingest: Ingest | None = None
        self._ratio_lock, self._wound_down, self._leaving = threading.Lock(), False, 0
        self.buffer, self.replay_fit = build_ring(cfg, spec, self.device)
        self.table = build_table(cfg, self.buffer)
        self.startup_unix["buffer"] = time.time()
        self.sac = build_update(cfg, spec, self.device)
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
        self.ingest = self._starting or InProcessIngest(
            spec, self.publisher, pack, **server, frames=self.buffer.index if self.pixels else None)

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
        with self._model_lock:  # a consistent snapshot between two updates (host copies)
            # publish these very networks, so the checkpoint's policy_version names them
            weights = self._publish()
            if self.cfg.algorithm.actor_ema > 0:
                weights = self.sac.policy_weights(weights.version, averaged=True)
            model = {
                "sac": host_copy(self.sac.state_dict()),
                "updates": self.updates,
                "received": self.received,
                "inserted": self.buffer.inserted,
                # the training thread publishes outside the lock, from these same networks
                "policy_version": weights.version,
                # no secret in runs/: the token is per job and handed to actors by the driver
                "config": self.cfg.model_dump(exclude={"server": {"token"}}),
            }
            # the rows as of now; a pixel env's frame replay is not saved (its GBs of frames)
            copy = self.buffer.start_copy() if save_replay and not self.pixels else None
        rows = None
        if copy is not None:
            while copy.remaining:
                with self._model_lock:
                    copy.step()
            rows = copy.result()
        write_checkpoint(path, model, rows)
        return weights

    def restore(self, path: str) -> None:
        """The update, the counters and (when they are of the same save) the ring's rows of the
        checkpoint at `path`."""
        model = read_model(path, self.device)
        self.sac.load_state_dict(model["sac"])
        self.updates = int(model["updates"])
        self.received = int(model["received"])
        self._base_version = int(model["policy_version"])
        rows, replay = read_rows(path, model)
        if rows is not None:
            self.buffer.load_state_dict(rows)
        else:
            if replay != "absent":
                log.warning("%s/replay.pt is not of the same save as model.pt; starting with "
                            "an empty buffer", path)
            self._ratio_base = self.updates
        self.restored = {"path": str(Path(path)), "updates": self.updates, "received": self.received,
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
