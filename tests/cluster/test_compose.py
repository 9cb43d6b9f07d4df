"""docker-compose.yml: a GPU head, scalable CPU workers, Prometheus and Grafana (no Docker engine
runs here, so the file, its mounts and the provisioned dashboard are checked statically; where a
docker client with compose exists, `docker compose config` must accept the file too)."""

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
    assert jobs["ray-head"]["static_configs"][0]["targets"] == ["ray-head:8080"]


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
    from cluster.prom import ALL_NAMES

    queried = set(re.findall(r"ray_(herd_\w+)", " ".join(exprs)))
    assert queried and queried <= set(ALL_NAMES), queried - set(ALL_NAMES)
    for must in ("herd_env_steps_per_s", "herd_eval_return", "herd_actor_steps_per_s", "herd_policy_lag"):
        assert must in queried


def test_docker_compose_config_accepts_the_file():
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no docker client on this machine")
    env = {**os.environ, "RAY_AUTH_TOKEN": "t" * 32, "GRAFANA_ADMIN_PASSWORD": "p" * 12}
    r = subprocess.run([docker, "compose", "-f", str(COMPOSE), "config", "--quiet"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=False, env=env)
    if r.returncode and ("is not a docker command" in r.stderr or "unknown" in r.stderr.lower()):
        pytest.skip(f"docker client without the compose plugin: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
