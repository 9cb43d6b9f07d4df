"""Trainer: the SAC update on one training thread, the only writer of the ring and the only
caller of the update, paced by the replay table's limiter.

    loop:  limiter ─► take staged blocks (Ingest) ─► ring ─► update (graphed) ─► publish weights

The update itself (learner/update/sac.py, learner/graph/capture.py) is plain loss functions wrapped in the
graph machinery; this module only decides when it runs and what goes out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import torch

from herd.learner.graph.update_gaps import UpdateGaps
from herd.learner.replay.table import ReplayTable
from herd.learner.rpc.publisher import WeightPublisher
from herd.learner.update.sac import LOSS_NAMES, SAC
from herd.proto import herd_pb2 as pb

Take = Callable[[int, float], list]
"""Staged packed row blocks: take(limit, timeout) -> up to `limit`, waiting up to `timeout`."""


class Trainer:
    def __init__(self, sac: SAC, table: ReplayTable, publisher: WeightPublisher, take: Take, *,
                 publish_every_s: float, num_threads: int):
        self.sac, self.table, self.publisher, self.take = sac, table, publisher, take
        self.compute = sac.compute
        self.publish_every_s, self.num_threads = publish_every_s, num_threads
        self.updates = 0
        self.base_version = 0  # the restored checkpoint's version: new versions go above it
        self.losses = torch.zeros(len(LOSS_NAMES))
        self.rates = (0.0, 0.0)  # updates/s, inserts/s over the last second
        self.first_unix: dict[str, float] = {}  # first_rows, first_update: when this thread did them
        self.model_lock = threading.Lock()  # held by an update, an insert and a checkpoint
        self.error: BaseException | None = None
        self.step = None
        self.gaps = UpdateGaps()  # the update stream's longest pauses (learner/graph/update_gaps.py)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="herd-train", daemon=True)

    def publish(self) -> pb.PolicyWeights:
        """The current policy as the next version, serialized once for every stream."""
        version = max(self.publisher.version, self.base_version) + 1
        weights = self.sac.policy_weights(version)
        self.publisher.publish(weights)
        return weights

    def graph_stats(self) -> dict:
        """The status's fields about the update's graph (learner/graph/capture.py graph_stats) and the
        update stream's longest pauses (learner/graph/update_gaps.py); ingest may ask for a status
        before the training thread starts."""
        from herd.learner.graph.capture import graph_stats

        return {**graph_stats(self.step), **self.gaps.stats()}

    def start(self) -> None:
        """Build the update callable (its graph prepared as the training thread starts) and run."""
        from herd.learner.graph.capture import make_update

        self.step = make_update(self.sac, self.table.ring)
        self._thread.start()

    def _insert_pending(self, block: bool) -> None:
        """Staged blocks -> ring, on the ingest stream (learner/replay/ring_writer.py). take()
        hands the previous take's blocks back to ingest: their copies must be done (settle)."""
        self.table.settle()
        blocks = self.take(64, 0.05 if block else 0.0)
        if blocks:
            with self.model_lock:
                self.table.insert(blocks)
            if "first_rows" not in self.first_unix:
                self.first_unix["first_rows"] = time.time()

    def _loop(self) -> None:
        torch.set_num_threads(self.num_threads)  # per thread under OpenMP (actors/policy.py)
        k = self.compute.updates_per_call
        ring = self.table.ring
        gaps = self.gaps
        last_pub = last_rate = time.monotonic()
        rate_base = (self.updates, ring.inserted)
        try:
            with self.model_lock:  # both warm up on the live model and roll it back
                if self.compute.graph_in_background:
                    # CUDA: the uncompiled graph is captured now and replayed while the
                    # compiled one is built on a thread of its own (a twin SAC); a later call
                    # swaps it in (learner/graph/capture.py)
                    self.step.prepare_in_background()
                else:
                    self.step.prepare()  # compile + capture while the actors start up
            while not self._stop.is_set():
                may_insert, may_update = self.table.limits(self.updates)
                if may_update:
                    gaps.ready()
                else:
                    gaps.blocked()
                if may_insert:
                    self._insert_pending(block=not may_update)
                if may_update:
                    with self.model_lock:
                        losses = self.step()
                        self.updates += k
                    gaps.done()
                    if "first_update" not in self.first_unix:
                        self.first_unix["first_update"] = time.time()
                    if self.updates % 50 < k:
                        self.losses = losses.float().cpu()
                now = time.monotonic()
                if now - last_pub >= self.publish_every_s and self.updates:
                    self.publish()
                    last_pub = now
                if now - last_rate >= 1.0:
                    du, di = self.updates - rate_base[0], ring.inserted - rate_base[1]
                    self.rates = (du / (now - last_rate), di / (now - last_rate))
                    rate_base, last_rate = (self.updates, ring.inserted), now
                if not may_insert and not may_update:
                    time.sleep(0.001)
        except BaseException as e:  # surfaced through the learner's status and stop()
            self.error = e
            raise

    def stop(self) -> None:
        """End the loop, then insert whatever is still staged (nothing accepted is lost)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        while True:
            self.table.settle()
            blocks = self.take(64, 0.0)
            if not blocks:
                break
            with self.model_lock:
                self.table.insert(blocks)
