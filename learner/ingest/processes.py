"""Ingest in processes of their own: their Python never takes the training process's GIL.

The servicer, the gRPC server and the row packing of InProcessIngest
(learner/ingest/in_process.py) run in a child process; the training process only copies packed
rows out of shared memory:

    child:   gRPC ─► validate, dedup ─► pack into a free shared slot ─data pipe: (slot, rows)─►
    parent:  take() ─► views of the slots ─► ring (RingWriter) ─► next take() frees them ─► child

Control (weights to serve, the learner's status for GetStatus, counts, stop) goes over a second
pipe. Several children may run side by side, each on a port of its own, each actor sent to its
own at handshake (IngestProcess; learner.server.ingest_processes). A child ends when its control
pipe does, which the kernel closes when the learner's process dies however it dies: a killed
learner leaves no process holding its port. It does not use PR_SET_PDEATHSIG, which fires when
the *thread* that started the child ends (a threaded Ray actor may construct the learner on a
pool thread). Why ingest leaves the training process: docs/tried.md#ingest-in-a-process.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import mmap
import multiprocessing as mp
import os
import threading
import time
from multiprocessing import connection, shared_memory
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

import numpy as np

from herd.learner.ingest.child import start_child
from herd.learner.replay.row_layout import RowLayout
from herd.learner.rpc.publisher import WeightPublisher
from herd.proto import herd_pb2 as pb

if TYPE_CHECKING:  # torch where it is used: the learner boots the children before its import
    import torch

log = logging.getLogger("herd.learner")
SLOT_ROWS = 512
"""Rows per shared slot; a larger batch takes several slots."""


class IngestProcess:
    """Ingest (learner/ingest/__init__.py: take, counts, port, stop) with the work in
    `processes` children.

    With several, each listens on a port of its own (learner.server.port + k) and an
    actor's handshake anywhere is answered with its home process's port (HandshakeReply
    .ingest_port, by a stable hash of actor_id): every connection of an actor goes to one
    process, which keeps its dedup exact. max_actors is shared out evenly among them."""

    def __init__(self, processes: int = 1):
        """Boots `processes` children and returns at once: each starts Python and imports numpy
        and gRPC while the learner imports its own and builds its buffer and networks; start()
        then hands them their work, wait_ready() waits for their ports."""
        self.children: list[_Child] = []
        try:
            for _ in range(processes):
                self.children.append(_Child())
        except BaseException:
            self._kill()
            raise
        self.port: int | None = None
        self._stopped = threading.Event()

    def start(self, spec: pb.EnvSpec, publisher: WeightPublisher, layout: dict, *,
              staging_batches: int, max_batch: int, status, pin: bool = False, **server) -> None:
        """`layout`: ReplayBuffer arguments (obs_shape, action_dim, obs_dtype,
        one_step_discount) the children pack rows with; `server`: InProcessIngest's keyword arguments;
        `pin`: page-lock the slots (CUDA), so rows go from them to the device by DMA alone."""
        processes = len(self.children)
        if server.get("max_actors"):
            server["max_actors"] = -(-server["max_actors"] // processes)
        server.update(max_batch=max_batch, peers=processes > 1)
        # a fixed learner.server.port (a mapped or firewalled one) gives fixed ports: port, port + 1, ...
        first = server["port"]
        try:
            for k, c in enumerate(self.children):
                c.start(spec, layout, dict(server, port=first + k if first else 0), staging_batches, pin)
        except BaseException:
            self._kill()
            raise
        self._publisher = publisher
        self._status = status

    def wait_ready(self) -> int:
        """Wait until every child serves; the first one's port. Raises what stopped a child
        (the others are killed)."""
        try:
            ports = [c.ready() for c in self.children]
        except BaseException:
            self._kill()
            raise
        if len(self.children) > 1:
            for c in self.children:
                c.request("peers", ports, c.port)
        self.port = ports[0]
        self._publisher.subscribe(self._forward_weights)
        self._forward_weights()
        self._feeder = threading.Thread(target=self._feed_status, name="herd-ingest-status",
                                        daemon=True)
        self._feeder.start()
        return self.port

    def _kill(self) -> None:
        for c in self.children:
            c.kill()

    @property
    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.children]

    def _forward_weights(self) -> None:
        latest = self._publisher.newer_wire(0)
        if latest is not None and not self._stopped.is_set():
            for c in self.children:
                c.request("weights", *latest)  # (version, bytes): forwarded as they are

    def _feed_status(self) -> None:
        """The learner's status, once a second, for the children's GetStatus answers."""
        while not self._stopped.wait(1.0):
            try:
                status = self._status().SerializeToString()
                for c in self.children:
                    c.request("status", status)
            except (RuntimeError, OSError):  # stopping, or a child is gone (counts() says so)
                return

    def take(self, limit: int, timeout: float = 0.0) -> list[torch.Tensor]:
        """Views of up to `limit` filled slots; the previous call's slots go back to their
        children (the trainer has copied them into the ring by then)."""
        for c in self.children:
            c.release()
        out: list[torch.Tensor] = []
        ready = connection.wait([c.data for c in self.children], timeout)
        for c in self.children:
            if c.data in ready:
                c.drain(out, limit)
        if not ready and timeout:  # wait() returns at once on ended children
            time.sleep(timeout)
        return out

    def counts(self) -> dict:
        parts = [c.counts() for c in self.children]
        total = {k: sum(p[k] for p in parts) for k in parts[0] if k not in ("mean_policy_lag", "per_actor")}
        total["mean_policy_lag"] = (sum(p["mean_policy_lag"] * p["received"] for p in parts)
                                    / max(1, total["received"]))
        total["per_actor"] = {a: n for p in parts for a, n in p["per_actor"].items()}
        return total

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving; staged slots stay readable for the trainer's last take()."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.port is None:  # never served: nothing staged, no books to keep
            return self._kill()
        self._feeder.join(timeout=5)
        for c in self.children:
            c.stop(grace)


class _Child:
    """One ingest process: its shared slots, its two pipes, its books once it has stopped."""

    def __init__(self):
        self.data, child_data = mp.Pipe()
        self._ctrl, child_ctrl = mp.Pipe()
        self._ctrl_lock = threading.Lock()
        self._held: list[int] = []  # slots handed to the trainer by the last take()
        self._final: dict | None = None
        self.proc = start_child("ingest.processes", child_data, child_ctrl)  # learner/ingest/child.py

    def start(self, spec: pb.EnvSpec, layout: dict, server: dict, staging_batches: int, pin: bool):
        """The shared slots, and the child's work: it serves once it has booted."""
        import torch

        max_batch = server["max_batch"]
        rows = min(max_batch, SLOT_ROWS)
        slots = max(staging_batches, -(-max_batch // rows))
        rows_layout = RowLayout.of(**layout)  # plain numbers: the child never imports torch
        width = rows_layout.row_width
        nbytes = slots * rows * width * 4
        free = os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize
        if nbytes > free:  # a sparse segment past the tmpfs size would SIGBUS on first write
            raise OSError(f"ingest needs {nbytes / 2**20:.0f} MiB of /dev/shm, "
                          f"{free / 2**20:.0f} MiB free: lower staging_batches or use ingest_process: off")
        self._shm = shared_memory.SharedMemory(create=True, size=nbytes)
        self.blocks = torch.from_numpy(np.ndarray((slots, rows, width), np.float32, buffer=self._shm.buf))
        if pin:  # stays registered as long as the mapping lives (this process)
            err = torch.cuda.cudart().cudaHostRegister(self.blocks.data_ptr(), nbytes, 0)
            if int(err) != 0:  # not cudaSuccess: still right, one host copy slower
                log.warning("ingest slots could not be page-locked (%s): rows go through a "
                            "pinned copy", err)
        self._ctrl.send((spec.SerializeToString(), rows_layout, server, self._shm.name, slots, rows))

    def kill(self) -> None:
        """End the process at once. Slots of a child that never served are unlinked here; a
        serving child's are unlinked by stop(), after its books are read."""
        self.proc.kill()
        shm = getattr(self, "_shm", None)
        if shm is not None and getattr(self, "port", None) is None:
            shm.unlink()

    def ready(self) -> int:
        """The child's port, once it serves; raises what stopped it."""
        if not self._ctrl.poll(120):
            raise RuntimeError("the ingest process did not start within 120 s")
        kind, value = self._ctrl.recv()
        if kind == "error":
            self.proc.wait(5)
            raise value
        self._shm.unlink()  # both processes have it mapped: the memory lives until they unmap
        self.port = value
        return value

    def request(self, *msg, reply: bool = False):
        with self._ctrl_lock:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the ingest process died (exit code {self.proc.returncode})")
            self._ctrl.send(msg)
            return self._ctrl.recv() if reply else None

    def release(self) -> None:
        if self._held:
            try:
                self.data.send(self._held)
            except OSError:  # the child has ended: its slots are no longer anyone's
                pass
            self._held = []

    def drain(self, out: list, limit: int) -> None:
        """Views of the filled slots, one view per run of neighbouring slots (full but for the
        last): each view is one host-to-device copy, and on the training thread every copy's
        calls wait for the GIL while a compile runs there."""
        named: list[tuple[int, int]] = []
        try:
            while len(named) < limit and self.data.poll(0):
                named += self.data.recv()
        except (EOFError, OSError):  # the child has ended: all it staged was read before EOF
            pass
        rows = self.blocks.shape[1]
        i = 0
        while i < len(named):
            first, j = named[i][0], i
            while (j + 1 < len(named) and named[j][1] == rows
                   and named[j + 1][0] == named[j][0] + 1):
                j += 1
            n = (j - i) * rows + named[j][1]
            out.append(self.blocks[first:first + j - i + 1].view(-1, self.blocks.shape[2])[:n])
            self._held += [slot for slot, _ in named[i:j + 1]]
            i = j + 1

    def counts(self) -> dict:
        if self._final is not None:  # the child is gone: its last books stand
            return self._final
        return self.request("counts", reply=True)

    def stop(self, grace: float) -> None:
        self._final = self.request("stop", grace, reply=True)
        self.proc.wait(timeout=30)


class SlotStaging:
    """The child's side of the slots: `put` packs a batch into free slots and names them to
    the parent; the parent's next take() sends them back (read on the loop)."""

    def __init__(self, blocks: np.ndarray, pack, data):
        """`blocks`: the [slots, rows, row_width] shared slots; `pack(rows, dst)` packs a batch
        into one slot's array (RowLayout.pack)."""
        self.blocks, self.pack, self.data = blocks, pack, data
        self.rows = blocks.shape[1]
        self.free = collections.deque(range(blocks.shape[0]))
        self._filled: list[tuple[int, int]] = []  # (slot, rows) not yet named to the parent
        self._open: int | None = None  # the slot this loop pass fills, and its rows so far
        self._fill = 0
        self._naming = False  # _name_filled is due at the end of this pass
        self._space: asyncio.Event | None = None

    def attach(self) -> None:
        """Read returned slots on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._space = asyncio.Event()
        self._loop.add_reader(self.data.fileno(), self._returned)

    def _returned(self) -> None:
        try:
            while self.data.poll(0):
                self.free.extend(self.data.recv())
        except (EOFError, OSError):  # the parent is gone; the control pipe ends the process
            self._loop.remove_reader(self.data.fileno())
        self._space.set()

    def _need(self, n: int) -> int:
        """Free slots `n` rows need beyond the room left in the open slot."""
        room = self.rows - self._fill if self._open is not None else 0
        return max(0, -(-(n - room) // self.rows))

    async def put(self, arrays: dict) -> bool:
        n = len(arrays["reward"])
        if len(self.free) < self._need(n):
            self._space.clear()
            try:
                await asyncio.wait_for(self._space.wait(), 0.2)
            except TimeoutError:
                return False
            if len(self.free) < self._need(n):  # (the open slot may have been named meanwhile)
                return False
        # The batches of one loop pass share slots, one after another: the training process
        # then takes a few full slots, not a slot per batch. Its every block costs it GIL
        # hand-overs (pipe, views, a host-to-device copy and its stream calls), and while the
        # compiled graph is built on another of its threads each hand-over waits.
        lo = 0
        while lo < n:
            if self._open is None:
                self._open, self._fill = self.free.popleft(), 0
            m = min(n - lo, self.rows - self._fill)
            self.pack({k: v[lo:lo + m] for k, v in arrays.items()},
                      self.blocks[self._open, self._fill:self._fill + m])
            self._fill += m
            lo += m
            if self._fill == self.rows:
                self._filled.append((self._open, self._fill))
                self._open = None
        if not self._naming:  # the first of this loop pass: name them all at its end
            self._naming = True
            self._loop.call_soon(self._name_filled)
        return True

    def _name_filled(self) -> None:
        """One pipe message for all the slots filled in a pass of the loop, not one per batch;
        the open slot goes too (a slot is filled within one pass: rows [0, n) of it)."""
        if self._open is not None:
            self._filled.append((self._open, self._fill))
            self._open = None
        filled, self._filled = self._filled, []
        self._naming = False
        self.data.send(filled)


def main(data_fd: int, ctrl_fd: int) -> None:
    """The ingest process: InProcessIngest's server and servicer, packing into the shared
    slots."""
    data, ctrl = Connection(data_fd), Connection(ctrl_fd)
    # all the imports first, torch not among them: the parent builds its learner meanwhile
    from herd.learner.ingest.in_process import counts
    from herd.learner.rpc.handlers import LearnerServicer
    from herd.learner.rpc.server import Server
    from herd.proto.heap import steady_heap

    steady_heap()  # batches reuse heap blocks (a process that imports torch gets that by chance)
    try:
        spec_bytes, layout, server, shm_name, slots, rows = ctrl.recv()
    except (EOFError, OSError):  # the learner went away before it had work for this process
        return

    try:
        with open(f"/dev/shm/{shm_name}", "r+b") as f:  # mapped as is: the parent unlinks it
            shm = mmap.mmap(f.fileno(), 0)
        blocks = np.ndarray((slots, rows, layout.row_width), np.float32, buffer=shm)
        spec = pb.EnvSpec.FromString(spec_bytes)
        publisher = WeightPublisher()
        status = [pb.LearnerStatus()]
        staging = SlotStaging(blocks, layout.pack, data)
        host, port = server.pop("host"), server.pop("port")
        token, mb = server.pop("token"), server.pop("max_message_mb")
        tls = server.pop("tls_cert"), server.pop("tls_key")

        def servicer():
            staging.attach()  # the slot-return pipe is read on the loop
            return LearnerServicer(spec, publisher, staging.put, status=lambda: status[0], **server)

        srv = Server(servicer, host, port, token, mb, *tls)
    except BaseException as e:  # noqa: BLE001  (the parent raises it)
        ctrl.send(("error", e))
        return
    publisher.subscribe(lambda: srv.call(srv.servicer.weights_published))
    ctrl.send(("ready", srv.port))
    while True:
        try:
            kind, *args = ctrl.recv()
        except (EOFError, OSError):  # the learner went away, however it went
            srv.stop(0)
            return
        if kind == "weights":
            publisher.publish_wire(*args)
        elif kind == "status":
            status[0] = pb.LearnerStatus.FromString(args[0])
        elif kind == "peers":
            srv.call(srv.servicer.set_peers, *args)
        elif kind == "counts":
            ctrl.send(counts(srv.servicer))
        elif kind == "stop":
            srv.stop(args[0])
            publisher.close()
            ctrl.send(counts(srv.servicer))
            return
