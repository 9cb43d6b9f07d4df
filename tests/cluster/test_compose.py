"""docker-compose.yml: a GPU head, scalable CPU workers, Prometheus and Grafana. The file, its
mounts and the provisioned dashboard are checked statically; where a Docker engine runs,
test_compose_cluster builds the image, starts a head and 2 CPU workers with Ray token auth, runs
a job across them and looks at Prometheus (and Grafana, where its image is here) in Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_services(compose):
    services = compose["services"]
    assert {"ray-head", "ray-worker", "prometheus", "grafana"} <= set(services)
    head, worker = services["ray-head"], services["ray-worker"]
    assert "ray start --head" in head["command"] and "--metrics-export-port=8080" in head["command"]
    assert "--dashboard-host=0.0.0.0" in head["command"]
    gpus = head["deploy"]["resources"]["reservations"]["devices"]
    assert gpus[0]["driver"] == "nvidia" and "gpu" in gpus[0]["capabilities"]
    # workers join the head and offer the resource `herd submit --actor-resources` asks for
    assert "--address=ray-head:6379" in worker["command"]
    assert "herd_worker" in worker["command"] and "deploy" not in worker
    assert worker["depends_on"]["ray-head"]["condition"] == "service_healthy"


def test_worker_scales(compose):
    """`docker compose up --scale ray-worker=N` needs no fixed name and no fixed host port."""
    worker = compose["services"]["ray-worker"]
    assert "container_name" not in worker and "hostname" not in worker
    assert "ports" not in worker


def test_ports_bound_to_loopback_by_default(compose):
    published = 0
    for name, svc in compose["services"].items():
        for port in svc.get("ports", []):
            published += 1
            assert isinstance(port, str), f"{name}: use the 'HOST:PORT:PORT' string form"
            host = re.sub(r"\$\{HERD_BIND:-([^}]*)\}", r"\1", port).split(":")[0]
            assert host == "127.0.0.1", f"{name} publishes {port} beyond loopback by default"
    assert published >= 3
    ports = " ".join(compose["services"]["ray-head"]["ports"])
    assert ":8265" in ports


def test_secrets_are_required_not_defaulted(compose):
    """Ray token auth on every node and a Grafana admin password of the user's: compose refuses
    to start without them (`${VAR:?message}`) rather than falling back to no auth or admin/admin."""
    env = compose["x-herd"]["environment"]
    assert env["RAY_AUTH_MODE"] == "token"
    assert env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?")
    for name in ("ray-head", "ray-worker"):
        assert compose["services"][name]["environment"]["RAY_AUTH_TOKEN"] == env["RAY_AUTH_TOKEN"]
    health = " ".join(compose["services"]["ray-head"]["healthcheck"]["test"])
    assert "Authorization: Bearer $$RAY_AUTH_TOKEN" in health
    grafana = compose["services"]["grafana"]["environment"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert "disabled" not in COMPOSE.read_text()


def test_mounted_files_exist(compose):
    for name, svc in compose["services"].items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                path = ROOT / src
                if src.rstrip("/").endswith("runs"):
                    continue  # created by the first job
                assert path.exists(), f"{name} mounts {src}, which is missing"
    head = compose["services"]["ray-head"]
    build = head.get("build") or compose["x-herd"]["build"]
    assert (ROOT / build["context"] / build["dockerfile"]).is_file()
    # Prometheus shares the head's temp dir: Ray's service discovery file lives there
    assert any(v.startswith("ray-tmp:/tmp/ray") for v in head["volumes"])
    assert "ray-tmp:/tmp/ray:ro" in compose["services"]["prometheus"]["volumes"]


def test_prometheus_scrapes_ray():
    prom = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    files = jobs["ray"]["file_sd_configs"][0]["files"]
    assert files == ["/tmp/ray/prom_metrics_service_discovery.json"]
    # Herd's series keep their own `job` label (the dashboard selects by it), each scraped once
    assert jobs["ray"]["honor_labels"] is True and list(jobs) == ["ray"]


def test_grafana_provisioning_and_dashboard(compose):
    prov = ROOT / "deploy/grafana/provisioning"
    ds = yaml.safe_load((prov / "datasources/prometheus.yml").read_text())["datasources"][0]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((prov / "dashboards/herd.yml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in compose["services"]["grafana"]["volumes"]

    dash = json.loads((ROOT / "deploy/grafana/dashboards/herd.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(dash["panels"]) >= 8 and all("ray_herd_" in e for e in exprs)
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == ds["uid"]
    # every metric a panel queries is one the controller exports (cluster/prom.py)
    from herd.prom import ALL_NAMES

    queried = set(re.findall(r"ray_(herd_\w+)", " ".join(exprs)))
    assert queried and queried <= set(ALL_NAMES), queried - set(ALL_NAMES)
    for must in ("herd_env_steps_per_s", "herd_eval_return", "herd_actor_steps_per_s", "herd_policy_lag"):
        assert must in queried


def test_docker_compose_config_accepts_the_file():
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no docker client on this machine")
    env = {**os.environ, "RAY_AUTH_TOKEN": "t" * 32, "GRAFANA_ADMIN_PASSWORD": "p" * 12}
    r = subprocess.run([docker, "compose", "-f", str(COMPOSE), "-f", str(ROOT / "docker-compose.cpu.yml"),
                        "config", "--quiet"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=False, env=env)
    if r.returncode and ("is not a docker command" in r.stderr or "unknown" in r.stderr.lower()):
        pytest.skip(f"docker client without the compose plugin: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr


# ---- the cluster, really started ----------------------------------------------------------------

CPU = ROOT / "docker-compose.cpu.yml"
JOB = {  # tests/jobs.py's SMALL, one 1-CPU actor per 1-CPU worker; the learner stays on the head
    "env": {"id": "InvertedPendulum-v5"},
    "learner": {"algorithm": {"hidden_sizes": [32, 32]},
                "replay": {"batch_size": 32, "capacity": 20000, "min_size": 300, "ratio": 0.5,
                           "ratio_tolerance": 200},
                # workers dial it across the compose network (the driver makes a token)
                "server": {"publish_every_s": 0.3, "host": "0.0.0.0"},
                "placement": {"num_cpus": 1}},
    "actors": {"num_actors": 2, "num_envs": 2, "steps_per_push": 8, "warmup_steps": 200, "num_cpus": 1},
    "run": {"name": "compose", "max_env_steps": 10_000_000, "max_seconds": 600, "eval_every_s": 5,
            "eval_episodes": 1, "log_every_s": 1, "checkpoint_every_s": 60},
}
PLACEMENT = """
import json, ray
from ray.util.state import list_actors
ray.init("auto", logging_level="ERROR")
nodes = {n["NodeID"]: n["NodeManagerHostname"] for n in ray.nodes() if n["Alive"]}
ips = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
where = {a.class_name + ":" + a.name: nodes.get(a.node_id) for a in list_actors(filters=[("state", "=", "ALIVE")])}
print(json.dumps({"hosts": sorted(nodes.values()), "ips": ips, "actors": where}))
"""


def sh(*cmd: str, env=None, timeout=600, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and r.returncode:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise AssertionError(f"{' '.join(cmd[:4])} ... exited {r.returncode}:\n{tail}")
    return r


def engine_or_skip() -> str:
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no docker client (.ci/docker-up installs Debian's docker.io)")
    r = sh(docker, "info", "--format", "{{.ServerVersion}}", check=False, timeout=30)
    if r.returncode:
        pytest.skip(f"no Docker engine answers: {r.stderr.strip().splitlines()[-1][:150]}")
    if sh(docker, "compose", "version", check=False, timeout=30).returncode:
        pytest.skip("docker client without the compose v2 plugin (.ci/docker-up installs it)")
    return docker


def have_image(docker: str, name: str) -> bool:
    return sh(docker, "image", "inspect", name, check=False, timeout=30).returncode == 0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, **kw):
    import urllib.parse
    import urllib.request

    with urllib.request.urlopen(url + ("?" + urllib.parse.urlencode(kw) if kw else ""), timeout=10) as r:
        return json.loads(r.read())


def until(pred, timeout: float, what: str, poll: float = 1.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = pred()
        except (OSError, ValueError, KeyError, AssertionError):
            value = None
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def chromium_dom(url: str, png: Path, budget_ms: int = 15000) -> str:
    """The page as Chromium renders it headless (scripts run for `budget_ms` of virtual time),
    its screenshot in `png`: one launch does both."""
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chrome:
        pytest.fail("no chromium (.ci/docker-up installs Debian's)")
    flags = [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1280,800", f"--virtual-time-budget={budget_ms}", f"--user-data-dir={png.parent / 'chrome'}"]
    dom = sh(*flags, f"--screenshot={png}", "--dump-dom", url, timeout=120).stdout
    assert png.stat().st_size > 10_000, f"Chromium's screenshot of {url} is blank"
    return dom


@pytest.mark.cluster
def test_compose_cluster(tmp_path):
    """Head + 2 CPU workers in containers, Ray token auth on: a job whose actors run in the worker
    containers and push to the learner in the head's, Prometheus scraping every node and Herd's
    series, the dashboard's queries answered, a graph drawn by Chromium; then one worker
    container killed mid-job: `herd status` names the lost node, the job goes on with the
    worker left and ends SUCCEEDED with the loss in its books (faults.nodes_lost; the steps the
    dead node's actor never delivered counted apart, acked = received = inserted); then
    `down -v` leaves no container, network or volume."""
    docker = engine_or_skip()
    import secrets
    import time

    t0 = time.monotonic()
    base = os.environ.get("HERD_BASE_IMAGE") or ("herd-base:bookworm" if have_image(docker, "herd-base:bookworm") else "")
    wheels = any((ROOT / "deploy/wheels").glob("*.whl"))
    build = [docker, "build", "-q", "-f", "deploy/Dockerfile", "-t", "herd:latest",
             "--build-arg", f"WHEELS_ONLY={int(wheels)}"] + (["--build-arg", f"BASE={base}"] if base else [])
    sh(*build, ".", env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=1500)
    prom_image = os.environ.get("PROMETHEUS_IMAGE", "prom/prometheus:v2.53.0")
    if not have_image(docker, prom_image):  # no registry here: Debian's Prometheus instead
        prom_image = "herd-prometheus:latest"
        sh(docker, "build", "-q", "-f", "deploy/Dockerfile.prometheus", "-t", prom_image,
           *(["--build-arg", f"BASE={base}"] if base else []), "deploy",
           env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=600)
    grafana_image = os.environ.get("GRAFANA_IMAGE", "grafana/grafana:11.1.0")
    grafana = have_image(docker, grafana_image)
    built = time.monotonic()

    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o777)  # the containers run as uid 1000
    (runs / "compose.yaml").write_text(yaml.safe_dump(JOB))
    ports = {k: free_port() for k in ("DASHBOARD_PORT", "RAY_METRICS_PORT", "PROMETHEUS_PORT", "GRAFANA_PORT")}
    env = {**os.environ, **{k: str(v) for k, v in ports.items()}, "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "GRAFANA_ADMIN_PASSWORD": secrets.token_hex(12), "HERD_RUNS_DIR": str(runs), "HEAD_CPUS": "2",
           "WORKER_CPUS": "1", "PROMETHEUS_IMAGE": prom_image, "GRAFANA_IMAGE": grafana_image}
    project = f"herdtest{os.getpid()}"
    # the head's GCS declares a silent node dead after 4 health checks of 2 s, 1 s apart (Ray's
    # defaults: 5 of 10 s, 3 s apart, ~30 s for a killed container): the test's own override
    fast_loss = tmp_path / "fast-node-loss.yml"
    fast_loss.write_text(yaml.safe_dump({"services": {"ray-head": {"environment": {
        "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "2000",
        "RAY_health_check_failure_threshold": "4"}}}}))
    compose = [docker, "compose", "-p", project, "-f", str(COMPOSE), "-f", str(CPU), "-f", str(fast_loss)]
    label = f"label=com.docker.compose.project={project}"
    try:
        sh(*compose, "up", "-d", "--pull", "never", "--no-build", "--scale", "ray-worker=2", "ray-head",
           "ray-worker", "prometheus", *(["grafana"] if grafana else []), env=env, timeout=300)
        head = [*compose, "exec", "-T", "ray-head"]

        def placement():
            return json.loads(sh(*head, "python", "-c", PLACEMENT, env=env, timeout=60).stdout)

        # (each placement() is a `docker compose exec` of a Ray driver: seconds of CPU)
        until(lambda: len(placement()["hosts"]) == 3, 120, "the head and 2 workers in Ray", poll=2)
        out = sh(*head, "herd", "submit", "/app/runs/compose.yaml", "--runs-dir", "/app/runs",
                 "--actor-resources", '{"herd_worker": 1}', env=env, timeout=180).stdout
        job = next(line.split()[1] for line in out.splitlines() if line.startswith("submitted"))
        started = time.monotonic()

        # ---- the actors run in the worker containers, the learner in the head's ----
        def spread():
            p = placement()
            envs = [h for a, h in p["actors"].items() if a.startswith("EnvActor:")]
            # the learner and the controller (whose loss would end the job) on the head
            head_only = [h for a, h in p["actors"].items() if a.startswith(("Learner:", "Controller:"))]
            return p if len(envs) == 2 and len(set(envs)) == 2 and "ray-head" not in envs and head_only == ["ray-head"] * 2 else None

        where = until(spread, 180, "2 env actors on the 2 workers, the learner and the controller on the head", poll=2)
        prom = f"http://127.0.0.1:{ports['PROMETHEUS_PORT']}"

        def query(expr: str) -> list:
            return get(f"{prom}/api/v1/query", query=expr)["data"]["result"]

        # ---- Prometheus: every node's target up, Herd's series scraped ----
        def targets_up():
            active = [t for t in get(f"{prom}/api/v1/targets")["data"]["activeTargets"] if t["labels"]["job"] == "ray"]
            hosts = {t["labels"]["instance"].rsplit(":", 1)[0] for t in active if t["health"] == "up"}
            return active if set(where["ips"]) <= hosts and all(t["health"] == "up" for t in active) else None

        until(targets_up, 120, f"Prometheus targets up for the nodes {where['ips']}")
        until(lambda: len(query(f'ray_herd_actor_steps{{job="{job}"}} > 0')) == 2, 180, "both actors' ray_herd_actor_steps")
        until(lambda: query(f'ray_herd_eval_return{{job="{job}"}}'), 120, "an evaluation in ray_herd_eval_return")
        dash = json.loads((ROOT / "deploy/grafana/dashboards/herd.json").read_text())

        def panels_with_data():
            empty = [p["title"] for p in dash["panels"]
                     if not any(query(t["expr"].replace("$job", job)) for t in p["targets"])]
            return not empty or print("panels without data yet:", empty)

        until(panels_with_data, 120, "every Herd dashboard panel's query to return data")

        # ---- a real browser: Prometheus' graph of the job's env steps/s ----
        png = tmp_path / "prometheus.png"
        dom = chromium_dom(f"{prom}/classic/graph?g0.expr=ray_herd_env_steps_per_s&g0.tab=0&g0.range_input=5m", png)
        (tmp_path / "prometheus.html").write_text(dom)
        drawn = {"graph": "graph_area" in dom and "<svg" in dom and "<path" in dom, "legend": job in dom}
        assert all(drawn.values()), f"Prometheus' graph in Chromium: {drawn} (DOM in {tmp_path})"
        if grafana:
            gpng = tmp_path / "grafana.png"
            gdom = chromium_dom(f"http://127.0.0.1:{ports['GRAFANA_PORT']}/d/{dash['uid']}/herd?orgId=1&from=now-5m&kiosk", gpng, 30000)
            assert "No data" not in gdom and all(p["title"] in gdom for p in dash["panels"]), "Grafana's Herd panels did not render with data"
        if os.environ.get("HERD_SAVE_SCREENSHOT"):  # the docs' pictures
            shutil.copy(png, ROOT / "docs/img/prometheus.png")
            if grafana:
                shutil.copy(gpng, ROOT / "deploy/grafana/screenshot.png")

        # ---- a worker container killed outright (SIGKILL): a machine lost mid-job ----
        def herd_status(*args: str) -> str:
            return sh(*head, "herd", "status", job, *args, env=env, timeout=90).stdout

        envs = sorted((a, h) for a, h in where["actors"].items() if a.startswith("EnvActor:"))
        # actor-0's host goes; the other actor (EnvActor:JOB-actor-N) is to go on
        doomed, survivor = envs[0][1], "actor-" + envs[1][0].rsplit("-", 1)[1]
        killed_at = time.monotonic()
        sh(docker, "kill", doomed, timeout=60)  # the container's hostname is its id
        lost = until(lambda: (st := json.loads(herd_status("--json")))["nodes_lost"] and st, 180,
                     f"the loss of {doomed} in herd status (placement {where['actors']})", poll=3)
        seen_after = time.monotonic() - killed_at
        assert len(lost["nodes_lost"]) == 1 and lost["nodes_lost"][0]["address"] in where["ips"], lost
        assert "1 node lost: " in " ".join(herd_status().split())
        # the job goes on with the worker left

        def survivor_steps() -> int:
            return next((a.get("steps", 0) for a in json.loads(herd_status("--json"))["actors"]
                         if a["actor_id"] == survivor), 0)

        steps0 = next((a.get("steps", 0) for a in lost["actors"] if a["actor_id"] == survivor), 0)
        until(lambda: survivor_steps() > steps0 + 100, 90, f"{survivor} to go on stepping", poll=3)

        # ---- stop: the job ends SUCCEEDED, the lost node and its undelivered steps in the books ----
        sh(*head, "herd", "stop", job, env=env, timeout=180)
        summary = until(lambda: json.loads((runs / job / "summary.json").read_text()), 240, "summary.json")
        final = until(lambda: (st := json.loads(herd_status("--json"))).get("ended") and st, 90, "the job to end")
        assert final["state"] == "SUCCEEDED", final.get("state")
        ls, faults = summary["learner"], summary["faults"]
        received = int(ls["received"])
        assert summary["stop_reason"] == "stopped by user" and summary["checkpoint"], summary
        assert len(faults["nodes_lost"]) == 1 and faults["killed_actor_processes"] >= 1, faults
        # every transition the learner took crossed once; what the dead node's actor stepped
        # and never delivered is counted apart
        assert received > 0 and summary["actor_acked"] == summary["actor_steps"] == received == int(ls["inserted"]), summary
        assert faults["killed_steps_lost_at_least"] is not None and faults["killed_steps_lost_at_least"] >= 0, faults
        print(f"\ncompose: build {built - t0:.0f} s, up+job {time.monotonic() - built:.0f} s "
              f"(job {time.monotonic() - started:.0f} s, {received} transitions from {where['actors']}; "
              f"node loss seen {seen_after:.0f} s after the kill, {faults['killed_steps_lost_at_least']} steps lost); "
              f"grafana: {'checked' if grafana else f'no image {grafana_image} here, skipped'}")
    except BaseException:  # what the head's Ray and the containers said, for the failure's reader
        sh(*compose, "cp", "ray-head:/tmp/ray/session_latest/logs", str(tmp_path / "head-logs"),
           env=env, check=False)
        (tmp_path / "compose.log").write_text(sh(*compose, "logs", "--no-color", env=env, check=False).stdout)
        print(f"\nthe head's Ray logs and the containers' output are in {tmp_path}")
        raise
    finally:
        down = sh(*compose, "down", "-v", "--remove-orphans", "--timeout", "20", env=env, timeout=180, check=False)
    assert down.returncode == 0, down.stderr
    left = [sh(docker, *kind, "-q", "--filter", label, env=env).stdout.split()
            for kind in (("ps", "-a"), ("network", "ls"), ("volume", "ls"))]
    assert left == [[], [], []], f"left behind (containers, networks, volumes): {left}"
    if not grafana:
        import warnings

        warnings.warn(f"Grafana not checked: no {grafana_image} image on this machine (no registry "
                      "serves it here; Debian, PyPI and npm ship no Grafana)", stacklevel=1)
