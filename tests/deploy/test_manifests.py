"""The compose profile and the Kubernetes manifests parse, and say what docs/replicas.md says they do."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config.loading import parse_config
from tests.support.harness import REPO

KUBERNETES = REPO / "deploy" / "kubernetes"
KEY = base64.urlsafe_b64encode(bytes(32)).decode()


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text("utf-8")) if document is not None]


def _manifests() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in _documents(path):
            found[document["kind"]] = document
    return found


def test_every_kubernetes_manifest_parses_and_the_kustomization_lists_them_all() -> None:
    manifests = _manifests()
    listed = set(manifests["Kustomization"]["resources"])
    assert listed == {path.name for path in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(manifests) >= {
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
    }


def test_the_deployment_probes_readiness_and_liveness_and_takes_the_store_from_a_secret() -> None:
    (container,) = _manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secrets = {
        item["valueFrom"]["secretKeyRef"]["name"]
        for item in container["env"]
        if "secretKeyRef" in item.get("valueFrom", {})
    }
    assert secrets == {"mcp-gateway-store"}


def test_the_audit_spool_is_on_the_node_s_volume_outside_every_pod_s_data_dir() -> None:
    """A pod that replaces a killed one has another data_dir; on the node it finds the spool."""
    manifests = _manifests()
    spool = yaml.safe_load(manifests["ConfigMap"]["data"]["gateway.yaml"])["store"]["spool"]
    (container,) = manifests["Deployment"]["spec"]["template"]["spec"]["containers"]
    (mount,) = [item["mountPath"] for item in container["volumeMounts"] if item["name"] == "data"]
    volumes = {volume["name"]: volume for volume in manifests["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    assert "hostPath" in volumes["data"]
    # On the node's volume, and the same path in every pod: no $(POD_NAME) in it.
    assert spool.startswith(f"{mount}/") and "$(" not in spool


def test_the_configured_files_are_valid_gateway_configurations(tmp_path: Path) -> None:
    environ = {
        "GATEWAY_DATA_DIR": str(tmp_path),
        "GATEWAY_POSTGRES_URL": "postgresql://gateway:secret@postgres:5432/gateway",
        "GATEWAY_REDIS_URL": "redis://redis:6379/0",
        "POSTGRES_PASSWORD": "secret",
        "GATEWAY_REGISTRATIONS_KEY": KEY,
        "REGISTRATIONS_KEY": KEY,
    }
    in_configmap = yaml.safe_load(_manifests()["ConfigMap"]["data"]["gateway.yaml"])
    in_compose = yaml.safe_load((REPO / "deploy" / "compose" / "gateway.yaml").read_text("utf-8"))
    for document in (in_configmap, in_compose):
        config = parse_config(document, source="manifest", base_dir=tmp_path, environ=environ)
        assert config.store.url is not None and config.store.redis == "redis://redis:6379/0"
        # Replicas sharing the database share the key of its registrations.
        assert config.store.key == KEY


def test_the_scaled_compose_file_runs_two_replicas_redis_postgres_and_haproxy_from_official_images() -> None:
    services = yaml.safe_load((REPO / "deploy" / "compose" / "compose.yaml").read_text("utf-8"))["services"]
    assert set(services) == {"sandbox-image", "redis", "postgres", "gateway-1", "gateway-2", "haproxy"}
    images = {services[name]["image"].split(":")[0] for name in ("redis", "postgres", "haproxy")}
    assert images == {"redis", "postgres", "haproxy"}
    haproxy = (REPO / "deploy" / "compose" / "haproxy.cfg").read_text("utf-8")
    assert "stick store-response res.hdr(Mcp-Session-Id)" in haproxy


def test_the_load_balancer_configuration_is_valid_haproxy() -> None:
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        pytest.skip("haproxy is not installed; install it with `bash .ci/redis.sh`")
    checked = subprocess.run(
        [binary, "-c", "-f", str(REPO / "deploy" / "compose" / "haproxy.cfg")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_top_level_compose_file_runs_one_gateway_and_nothing_of_the_scaled_one() -> None:
    services = yaml.safe_load((REPO / "compose.yaml").read_text("utf-8"))["services"]
    assert set(services) == {"sandbox-image", "gateway"}
    assert all("profiles" not in service for service in services.values())


@pytest.mark.parametrize("compose_file", ["compose.yaml", "deploy/compose/compose.yaml"])
def test_docker_compose_accepts_both_compose_files(compose_file: str) -> None:
    if subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("the docker compose plugin is not installed")
    checked = subprocess.run(
        ["docker", "compose", "-f", compose_file, "config", "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
