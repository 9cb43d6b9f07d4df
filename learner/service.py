"""The learner process: gRPC ingest -> staging -> replay ring -> SAC updates -> weights out.

`Learner` is a plain class; the job driver runs it as a Ray actor (num_gpus=1 on a GPU box).
One training thread is the only writer of the replay buffer and the only caller of the update.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import torch

from learner.config import LearnerConfig
from learner.publisher import WeightPublisher
from learner.replay import ReplayBuffer
from learner.sac import LOSS_NAMES, SAC
from learner.server import LearnerServicer, start_server
from proto import herd_pb2 as pb
from proto.heap import steady_heap

log = logging.getLogger("herd.learner")
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "learner.device is 'cuda' but this process sees no GPU "
            "(is the learner on a GPU node, and is torch a CUDA build?); "
            "use device: auto to fall back to the CPU"
        )
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


class Learner:
    """Owns the replay ring, the SAC state, the gRPC server and the weight publisher."""

    def __init__(self, cfg: LearnerConfig, spec: pb.EnvSpec, checkpoint: str | None = None,
                 latest: str | None = None):
        """`checkpoint`: where to start from (a resumed job). `latest`: where this job saves its
        own checkpoints; when one is there (a restart after a crash), it wins over `checkpoint`."""
        self.cfg = cfg
        self.spec = spec
        self.learner_id = uuid.uuid4().hex[:12]
        self.device = pick_device(cfg.device)
        torch.set_num_threads(cfg.num_threads)
        steady_heap()  # received batches reuse heap blocks instead of fresh page-faulted maps
        obs_dim = int(np.prod(spec.obs_shape))
        action_dim = int(np.prod(spec.action_shape))
        self.buffer = ReplayBuffer(
            cfg.buffer_capacity, tuple(spec.obs_shape), action_dim, self.device,
            TORCH_DTYPES[cfg.buffer_dtype], one_step_discount=cfg.gamma,
        )
        self.sac = SAC(cfg, obs_dim, action_dim, spec.action_low, spec.action_high, self.device)
        self.updates = 0
        self.received = 0
        self.rejected = 0
        self.bytes_received = 0
        self._lags: collections.deque[int] = collections.deque(maxlen=256)
        self._losses = torch.zeros(len(LOSS_NAMES))
        self._rates = (0.0, 0.0)
        self._count_lock = threading.Lock()
        self._staging: queue.Queue = queue.Queue(maxsize=cfg.staging_batches)
        self._model_lock = threading.Lock()
        self._ratio_base = 0  # updates restored without their buffer: the limiter starts anew
        self._base_version = 0
        self.restarted = _restarted_by_ray()
        self.restored: dict | None = None
        if latest and (Path(latest) / "model.pt").exists():
            checkpoint = latest
        if checkpoint:
            self.restore(checkpoint)
        self.publisher = WeightPublisher()
        self._publish()
        self._step = self._make_step()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.servicer = LearnerServicer(self, cfg.max_batch)
        self.server, self.port = start_server(
            self.servicer, cfg.host, cfg.port, cfg.token, cfg.max_message_mb,
            tls_cert=cfg.tls_cert, tls_key=cfg.tls_key,
        )
        self._thread = threading.Thread(target=self._train_loop, name="herd-train", daemon=True)
        self._thread.start()

    # ---- what the gRPC server calls (any thread) ----
    def stage(self, actor_id, arrays, policy_version, nbytes) -> bool:
        try:
            self._staging.put((arrays, policy_version), timeout=0.2)
        except queue.Full:
            return False
        with self._count_lock:
            self.received += len(arrays["reward"])
            self.bytes_received += nbytes
            self._lags.append(self.publisher.version - policy_version)
        return True

    def count_reject(self) -> None:
        with self._count_lock:
            self.rejected += 1

    # ---- the training thread: sole writer of the ring, sole caller of the update ----
    def _make_step(self):
        """The update callable (learner/graphed.py); captured on the training thread as it
        starts (GraphedUpdate.prepare)."""
        from learner.graphed import make_update

        return make_update(self.sac, self.buffer)

    def _limits(self) -> tuple[bool, bool]:
        """(may insert, may update) under the replay-ratio limiter."""
        cfg, buf = self.cfg, self.buffer
        warm = buf.size >= cfg.min_replay_size
        if cfg.replay_ratio is None:
            return True, warm
        allowed = cfg.replay_ratio * max(0, buf.inserted - cfg.min_replay_size)
        done = self.updates - self._ratio_base  # updates made on this ring's inserts
        may_insert = not warm or allowed - done < cfg.ratio_tolerance
        may_update = warm and done < allowed + cfg.ratio_tolerance
        return may_insert, may_update

    def _insert_pending(self, block: bool) -> None:
        """Staged batches -> pinned rows -> ring, on the ingest stream (learner/ingest_stream)."""
        taken = []
        try:
            taken.append(self._staging.get(timeout=0.05) if block else self._staging.get_nowait())
            while len(taken) < 64:
                taken.append(self._staging.get_nowait())
        except queue.Empty:
            pass
        if not taken:
            return
        writer = getattr(self, "_ring_writer", None)
        if writer is None:
            from learner.ingest_stream import RingWriter

            writer = self._ring_writer = RingWriter(self.buffer, chunk_rows=2 * self.cfg.max_batch)
        with self._model_lock:
            writer.write([arrays for arrays, _ in taken])

    def _train_loop(self) -> None:
        torch.set_num_threads(self.cfg.num_threads)  # per thread under OpenMP (actors/policy.py)
        last_pub = last_rate = time.monotonic()
        rate_base = (self.updates, self.buffer.inserted)
        try:
            with self._model_lock:
                self._step.prepare()  # compile + capture while the actors start up
            while not self._stop.is_set():
                may_insert, may_update = self._limits()
                if may_insert:
                    self._insert_pending(block=not may_update)
                if may_update:
                    with self._model_lock:
                        losses = self._step()
                        self.updates += self.cfg.updates_per_call
                    if self.updates % 50 < self.cfg.updates_per_call:
                        self._losses = losses.float().cpu()
                now = time.monotonic()
                if now - last_pub >= self.cfg.publish_every_s and self.updates:
                    self._publish()
                    last_pub = now
                if now - last_rate >= 1.0:
                    du, di = self.updates - rate_base[0], self.buffer.inserted - rate_base[1]
                    self._rates = (du / (now - last_rate), di / (now - last_rate))
                    rate_base, last_rate = (self.updates, self.buffer.inserted), now
                if not may_insert and not may_update:
                    time.sleep(0.001)
        except BaseException as e:  # surfaced through status() and stop()
            self._error = e
            raise

    def _publish(self) -> None:
        version = max(self.publisher.version, self._base_version) + 1
        self.publisher.publish(self.sac.policy_weights(version))

    # ---- control plane (the driver, via Ray) ----
    def address(self) -> str:
        host = self.cfg.advertise_host or self.cfg.host
        if host in ("0.0.0.0", "::"):
            import ray

            host = ray.util.get_node_ip_address()
        return f"{host}:{self.port}"

    def status_dict(self) -> dict:
        """Counters, rates, losses and memory; the fields of proto LearnerStatus."""
        if self._error is not None:
            raise RuntimeError(f"learner training thread failed: {self._error!r}")
        mem = (0, 0)
        if self.device.type == "cuda":
            mem = (torch.cuda.memory_allocated(self.device), torch.cuda.memory_reserved(self.device))
        with self._count_lock:
            lags = list(self._lags)
            received, rejected, nbytes = self.received, self.rejected, self.bytes_received
        return {
            "learner_id": self.learner_id,
            "policy_version": self.publisher.version,
            "updates": self.updates,
            "received": received,
            "inserted": self.buffer.inserted,
            "rejected_batches": rejected,
            "duplicate_batches": self.servicer.duplicates,  # resent after a lost ack, not inserted
            "replay_size": self.buffer.size,
            "replay_capacity": self.buffer.capacity,
            "updates_per_s": self._rates[0],
            "inserts_per_s": self._rates[1],
            "mean_policy_lag": float(np.mean(lags)) if lags else 0.0,
            "bytes_received": nbytes,
            "gpu_mem_allocated": mem[0],
            "gpu_mem_reserved": mem[1],
            "device": str(self.device),
            "losses": dict(zip(LOSS_NAMES, self._losses.tolist())),
            # beyond proto LearnerStatus: for the driver's fault accounting and the soak
            "capture_s": self._step.capture_s,  # compile + graph capture at start-up
            "pid": os.getpid(),
            "rss_bytes": _rss_bytes(),
            "restarted": self.restarted,
            "restored": self.restored,
        }

    def status(self) -> pb.LearnerStatus:
        fields = pb.LearnerStatus.DESCRIPTOR.fields_by_name
        return pb.LearnerStatus(**{k: v for k, v in self.status_dict().items() if k in fields})

    def weights(self) -> pb.PolicyWeights:
        return self.publisher.wait_newer(0, timeout=0)

    def save(self, path: str, save_replay: bool = False) -> str:
        """Atomic checkpoint: model.pt (+ replay.pt) written under temporary names, then renamed."""
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        with self._model_lock:  # a consistent snapshot between two updates
            # publish these very networks, so the checkpoint's policy_version names them
            self._publish()
            state = self._snapshot()
            if save_replay:
                self.buffer.save(out / "replay.pt")
        tmp = out / "model.pt.tmp"
        torch.save(state, tmp)
        os.replace(tmp, out / "model.pt")
        return str(out)

    def _snapshot(self) -> dict:
        return {
            "sac": self.sac.state_dict(),
            "updates": self.updates,
            "received": self.received,
            "inserted": self.buffer.inserted,
            "policy_version": self.publisher.version,
            # no secret in runs/: the token is per job and handed to actors by the driver
            "config": self.cfg.model_dump(exclude={"token"}),
        }

    def restore(self, path: str) -> None:
        import pickle

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

    def stop(self) -> dict:
        """Stop serving and training; what was accepted is inserted before returning."""
        self.servicer.stopping.set()
        self.server.stop(grace=1.0).wait()
        self._stop.set()
        self.publisher.close()
        self._thread.join(timeout=30)
        while not self._staging.empty():
            self._insert_pending(block=False)
        return self.status_dict()


def _restarted_by_ray() -> bool:
    """True when Ray restarted this learner actor after it died."""
    try:
        import ray

        if ray.is_initialized():
            ctx = ray.get_runtime_context()
            if ctx.get_actor_id() is not None and ctx.was_current_actor_reconstructed:
                return True
    except (ImportError, RuntimeError, AttributeError):  # not in a Ray actor
        return False
    return False


def _rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
