"""herd/preload.py (`herd up --preload`): a spare worker importing it takes work at once, and
torch & co. arrive in the background; a worker Ray started for a job takes its work bare."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import sys, time
t0 = time.perf_counter()
import herd.preload
returned = time.perf_counter() - t0
herd.preload.done.wait(120)
print(returned, herd.preload.done.is_set() and all(m in sys.modules for m in herd.preload.MODULES))
"""


def test_preload_returns_at_once_and_loads_in_the_background():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=180,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    returned, loaded = out.stdout.split()
    # torch alone takes ~3 s to import here: a preload that waited for it would not return in 1 s
    assert float(returned) < 1.0, out.stdout
    assert loaded == "True", out.stdout


ENDS_MID_IMPORT = """
import sys, time
import herd.preload
while not all(m in sys.modules for m in herd.preload.MODULES):  # every import has begun
    time.sleep(0.05)
"""


def test_a_process_that_ends_mid_import_exits_cleanly():
    """It waits for the half-done import. With a daemon thread the exit segfaulted (-11) in
    about half of such runs here: eight, two at a time, leave that a chance of ~1/250."""
    for _ in range(4):
        procs = [subprocess.Popen([sys.executable, "-c", ENDS_MID_IMPORT], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=180)
            assert p.returncode == 0, (p.returncode, err[-2000:])


def test_it_marks_its_start_and_end_in_the_folder_herd_up_watches(tmp_path):
    # a spare: Ray starts it for no job yet (its RAY_JOB_ID is the nil id)
    env = {**os.environ, "HERD_PRELOAD_DIR": str(tmp_path), "RAY_JOB_ID": "ffffffff"}
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=180,
                         check=False, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[1] == "True", out.stdout
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and names[0].split(".")[0] == names[1].split(".")[0], names
    assert [n.split(".")[1] for n in names] == ["done", "start"], names


def test_a_worker_started_for_a_job_takes_work_bare(tmp_path):
    env = {**os.environ, "HERD_PRELOAD_DIR": str(tmp_path), "RAY_JOB_ID": "02000000"}
    code = "import sys, herd.preload; print(herd.preload.done.is_set(), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         check=False, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False"], out.stdout
    assert not list(tmp_path.iterdir())


def test_torch_compiles_own_imports_come_too_only_where_a_gpu_shows():
    import herd.preload

    assert herd.preload.modules(gpu=False) == herd.preload.MODULES
    on_gpu = herd.preload.modules(gpu=True)
    assert on_gpu[:len(herd.preload.MODULES)] == herd.preload.MODULES
    assert "torch._inductor.compile_fx" in on_gpu and "triton" in on_gpu
