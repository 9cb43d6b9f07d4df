"""The ingest process's staging (learner/ingest_proc.SlotStaging): the batches that arrive in one
pass of its event loop share shared-memory slots, so the training process takes a few full
slots instead of one per batch; every row arrives once, in order, and a batch larger than the
room left spills into the next slot."""

from __future__ import annotations

import asyncio
import multiprocessing as mp

import numpy as np

from herd.learner.ingest_proc import SlotStaging
from herd.learner.row_layout import RowLayout

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
