"""`herd export` / herd.load_policy: every export acts as the actors' policy does (1e-5), for
both network layouts with observation normalization, and `herd evaluate` takes every path."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import numpy as np
import pytest
import yaml

from herd.actors.policy import MLPPolicy
from herd.proto import herd_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("onnx", "torchscript", "safetensors")


@pytest.fixture(params=["mlp", "residual"])
def run_dir(request, make_learner, env_cfg, tmp_path):
    """runs/JOB as a job leaves it: checkpoint/, config.yaml and a best_policy.pb whose
    observation statistics are far from (0, 1), so normalization is exercised."""
    learner = make_learner(actor_arch=request.param, actor_width=32, hidden_sizes=(32, 48), obs_norm=True)
    out = tmp_path / "runs" / f"herd-export-{request.param}"
    learner.save(str(out / "checkpoint"))
    (out / "config.yaml").write_text(yaml.safe_dump({"env": env_cfg.model_dump(mode="json")}))
    best = pb.PolicyWeights.FromString(learner.weights().SerializeToString())
    rng = np.random.default_rng(1)
    del best.obs_mean[:], best.obs_std[:]
    best.obs_mean.extend(rng.normal(0, 2, 4).tolist())
    best.obs_std.extend(rng.uniform(0.2, 3, 4).tolist())
    best.obs_clip = 5.0
    (out / "best_policy.pb").write_bytes(best.SerializeToString())
    return out


def reference(weights) -> MLPPolicy:
    from herd.actors.config import EnvConfig
    from herd.actors.envs import describe, make_env

    d = describe(make_env(EnvConfig(id="InvertedPendulum-v5")))
    return MLPPolicy(weights, d["action_low"], d["action_high"])


def test_exports_act_as_the_actor_policy(run_dir):
    from herd.evaluation import evaluate_checkpoint, weights_from_checkpoint
    from herd.export import export_policy, load_policy, sidecar

    obs = np.random.default_rng(0).normal(0, 3, (64, 4)).astype(np.float32)
    sources = {False: weights_from_checkpoint(run_dir / "checkpoint", load_policy(run_dir).env),
               True: pb.PolicyWeights.FromString((run_dir / "best_policy.pb").read_bytes())}
    for best, weights in sources.items():
        want = reference(weights).act(obs, deterministic=True)
        assert np.array_equal(load_policy(run_dir, best=best).act(obs), want)
        if best:  # what a run directory gives by default: its best policy, said so
            taken = load_policy(run_dir)
            assert np.array_equal(taken.act(obs), want) and taken.meta["which"] == "best"
        else:
            assert not np.array_equal(load_policy(run_dir).act(obs), want)
        for fmt in FORMATS:
            out = export_policy(run_dir, fmt, best=best)
            assert out.parent == run_dir / "export" and ("final" in out.name) == (not best)
            meta = json.loads(sidecar(out).read_text())
            assert meta["env"]["id"] == "InvertedPendulum-v5" and meta["obs_dim"] == 4
            assert meta["action_low"] == [-3.0] and (meta["obs_mean"] is not None)
            policy = load_policy(out)
            got = policy.act(obs)
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{fmt} best={best}")
            assert policy.act(obs[0]).shape == (1,)  # one observation in, one action out
            # the facts travel inside the file too: it loads without its JSON
            sidecar(out).unlink()
            np.testing.assert_allclose(load_policy(out).act(obs), want, atol=1e-5)
            noisy = load_policy(out, seed=3).act(obs, deterministic=False)
            assert np.all(np.abs(noisy) <= 3.0) and not np.allclose(noisy, want)
    # herd evaluate takes every path: the run, its checkpoint dir and model.pt, the .pb, exports
    paths = [run_dir, run_dir / "checkpoint", run_dir / "checkpoint" / "model.pt",
             run_dir / "best_policy.pb", *sorted((run_dir / "export").iterdir())]
    returns = {}
    for path in paths:
        if path.suffix != ".json":
            returns[path.name] = evaluate_checkpoint(path, episodes=1)["mean_return"]
    assert returns["checkpoint"] == returns["model.pt"] and returns[run_dir.name] == returns["best_policy.pb"]
    assert returns["policy-final.onnx"] == pytest.approx(returns["model.pt"], rel=1e-3)
    assert returns["policy.safetensors"] == pytest.approx(returns["best_policy.pb"], rel=1e-3)
    assert evaluate_checkpoint(run_dir, episodes=1)["which"] == "best"
    assert evaluate_checkpoint(run_dir, episodes=1, best=False)["which"] == "final"


def test_cli_export_evaluate_and_bad_input(make_learner, env_cfg, tmp_path, capsys):
    from herd.cli import main

    learner = make_learner(hidden_sizes=(32, 32))
    run = tmp_path / "runs" / "herd-cli-export"
    learner.save(str(run / "checkpoint"))
    (run / "config.yaml").write_text(yaml.safe_dump({"env": env_cfg.model_dump(mode="json")}))
    out = tmp_path / "p.onnx"
    assert main(["export", str(run), "--format", "onnx", "--out", str(out)]) == 0
    said = capsys.readouterr().out  # no evaluation finished: the final checkpoint, said so
    assert out.is_file() and (tmp_path / "p.json").is_file() and "wrote" in said
    assert f"from {run / 'checkpoint'} (the run's final checkpoint)" in said, said
    assert main(["evaluate", str(out), "--episodes", "1"]) == 0
    assert "deterministic return" in capsys.readouterr().out
    assert main(["evaluate", str(run), "--episodes", "1"]) == 0
    said = capsys.readouterr()
    assert "(the run's final checkpoint)" in said.out and "has no best_policy.pb" in said.err
    assert main(["export", str(run), "--format", "onnx", "--best"]) == 2  # no evaluation finished
    err = capsys.readouterr().err
    assert "best_policy.pb is missing" in err and len(err.strip().splitlines()) == 1
    # once an evaluation kept one, the best policy by default; --final for the last checkpoint
    (run / "best_policy.pb").write_bytes(learner.weights().SerializeToString())
    assert main(["evaluate", str(run), "--episodes", "1"]) == 0
    said = capsys.readouterr()
    assert f"from {run / 'best_policy.pb'} (the run's best policy" in said.out and not said.err
    assert main(["export", str(run), "--format", "safetensors"]) == 0
    assert "(the run's best policy" in capsys.readouterr().out
    assert (run / "export" / "policy.safetensors").is_file()
    # the export is as readable as the JSON beside it (safetensors writes a private temp file)
    modes = {stat.S_IMODE((run / "export" / n).stat().st_mode) for n in ("policy.safetensors", "policy.json")}
    assert len(modes) == 1, modes
    assert main(["evaluate", str(run), "--episodes", "1", "--final"]) == 0
    assert f"from {run / 'checkpoint'} (the run's final checkpoint)" in capsys.readouterr().out
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    assert main(["evaluate", str(junk)]) == 2
    err = capsys.readouterr().err
    assert "not a Herd policy" in err and len(err.strip().splitlines()) == 1
