"""The ingest process's staging (learner/ingest/processes.py SlotStaging): the batches that arrive in one
pass of its event loop share shared-memory slots, so the training process takes a few full
slots instead of one per batch; every row arrives once, in order, and a batch larger than the
room left spills into the next slot."""

from __future__ import annotations

import asyncio
import multiprocessing as mp

import numpy as np

from herd.learner.ingest.processes import SlotStaging
from herd.learner.replay.row_layout import RowLayout

LAYOUT = RowLayout(obs_dim=3, action_dim=2)
ROWS = 16  # rows per slot


def batch(n: int, start: int) -> dict:
    ids = np.arange(start, start + n, dtype=np.float32)
    return {"obs": np.repeat(ids[:, None], 3, 1), "next_obs": np.zeros((n, 3), np.float32),
            "action": np.zeros((n, 2), np.float32), "reward": ids, "terminated": np.zeros(n, np.uint8)}


def staged(sizes_per_pass: list[list[int]], slots: int = 8):
    """Put batches of these sizes, each inner list within one loop pass; the slot messages the
    parent received and the reward column (the row ids) of every named row, in order."""
    blocks = np.zeros((slots, ROWS, LAYOUT.row_width), np.float32)
    parent, child = mp.Pipe()
    staging = SlotStaging(blocks, LAYOUT.pack, child)
    messages, ids = [], []

    async def run():
        staging.attach()
        start = 0
        for sizes in sizes_per_pass:
            for n in sizes:  # no await between them: one pass of the loop
                assert await staging.put(batch(n, start))
                start += n
            await asyncio.sleep(0)  # the pass ends: its slots are named
            await asyncio.sleep(0)
            while parent.poll(0):
                msg = parent.recv()
                messages.append(msg)
                for slot, n in msg:
                    ids.extend(blocks[slot, :n, 2 * LAYOUT.obs_pad + LAYOUT.action_dim].tolist())
                parent.send([slot for slot, _ in msg])  # taken: the slots go back

    asyncio.run(run())
    return messages, ids


def test_one_pass_of_small_batches_fills_one_slot():
    messages, ids = staged([[4, 4, 4]])
    assert messages == [[(messages[0][0][0], 12)]]
    assert ids == list(range(12))


def test_a_batch_past_the_room_left_spills_into_the_next_slot_and_passes_do_not_mix():
    messages, ids = staged([[10, 10, 30], [5]])
    first, second = messages
    assert [n for _, n in first] == [16, 16, 16, 2]  # 50 rows: three full slots and two rows
    assert len({s for s, _ in first}) == 4
    assert [n for _, n in second] == [5]  # the next pass opens a slot of its own
    assert ids == list(range(55))


def test_full_slots_make_a_batch_wait_and_come_back_when_taken():
    blocks = np.zeros((2, ROWS, LAYOUT.row_width), np.float32)
    parent, child = mp.Pipe()
    staging = SlotStaging(blocks, LAYOUT.pack, child)

    async def run():
        staging.attach()
        assert await staging.put(batch(32, 0))  # both slots
        await asyncio.sleep(0)
        assert not await staging.put(batch(1, 32))  # none free within the wait
        msg = parent.recv()
        parent.send([slot for slot, _ in msg])  # the parent took them
        assert await staging.put(batch(1, 32))

    asyncio.run(run())


def test_the_parent_takes_neighbouring_full_slots_as_one_block():
    """_Child.drain: one view per run of neighbouring slots, full but for the last (one
    host-to-device copy each); every row once, in order; every slot held for release."""
    import torch

    from herd.learner.ingest.processes import _Child

    blocks = torch.arange(8 * ROWS, dtype=torch.float32).view(8, ROWS, 1)
    parent, child = mp.Pipe()
    taker = object.__new__(_Child)
    taker.data, taker.blocks, taker._held = parent, blocks, []
    child.send([(2, ROWS), (3, ROWS), (4, 5)])  # 2, 3 full and 4: one run
    child.send([(0, ROWS), (6, ROWS), (7, 3)])  # 0 alone, then 6 and 7
    child.send([(1, 4), (2, ROWS)])  # 1 is not full: it ends its run
    out: list = []
    taker.drain(out, limit=64)
    want = [(2, ROWS), (3, ROWS), (4, 5), (0, ROWS), (6, ROWS), (7, 3), (1, 4), (2, ROWS)]
    assert [b.shape[0] for b in out] == [2 * ROWS + 5, ROWS, ROWS + 3, 4, ROWS]
    assert torch.cat(out).flatten().tolist() == [v for s, n in want for v in blocks[s, :n].flatten().tolist()]
    assert taker._held == [s for s, _ in want]
