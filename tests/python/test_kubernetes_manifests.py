"""The Kubernetes manifests of deploy/kubernetes/, checked against Kubernetes and against Baton:

  * every document validates against the API schemas of KUBERNETES_VERSION, strictly (a misspelt or
    misplaced field fails), with kubernetes-validate (bundled schemas, offline); skipped, saying so,
    where that package is not installed;
  * the ConfigMap's deployment config loads with `baton worker`'s own loader and uses only the keys
    scheduler/config/deployment_config.h documents;
  * each worker StatefulSet has as many replicas as its phase has instances, and every Baton command
    line uses only flags its `baton <subcommand> --help` lists;
  * the pods give the processes what they need: a secret file only its owner can read, the ports the
    config names, the model on a volume, room in /dev/shm for the prefill KV pools.

No cluster is needed: the tests read files and run `baton` only where it stops before loading a
model or opening a port (`--help`, and `worker` with an out-of-range `--instance`).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST_DIR = REPO_ROOT / "deploy" / "kubernetes"
DEPLOYMENT_CONFIG_H = REPO_ROOT / "scheduler" / "config" / "deployment_config.h"

# The oldest release the manifests are written for (the apps.kubernetes.io/pod-index label they read
# needs 1.28+). kubernetes-validate checks against its newest bundled schema not newer than this.
KUBERNETES_VERSION = "1.30"

CONFIG_KEY = "deployment.yaml"
SECRET_KEY = "deployment-secret"


def _load_documents() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(MANIFEST_DIR.glob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                name = doc.get("metadata", {}).get("name")
                docs.append((f"{path.name}:{index}:{doc.get('kind')}/{name}", doc))
    return docs


DOCUMENTS = _load_documents()


def _all(kind: str) -> list[dict]:
    return [doc for _, doc in DOCUMENTS if doc.get("kind") == kind]


def _one(kind: str, name: str) -> dict:
    found = [doc for doc in _all(kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name} in {MANIFEST_DIR}, found {len(found)}"
    return found[0]


def _config_map() -> dict:
    holders = [doc for doc in _all("ConfigMap") if CONFIG_KEY in doc.get("data", {})]
    assert len(holders) == 1, f"expected one ConfigMap holding {CONFIG_KEY}"
    return holders[0]


def _deployment_config() -> dict:
    return yaml.safe_load(_config_map()["data"][CONFIG_KEY])


WORKLOADS = _all("Deployment") + _all("StatefulSet")


def _workload_id(workload: dict) -> str:
    return f"{workload['kind']}/{workload['metadata']['name']}"


def _baton_container(workload: dict) -> dict:
    containers = [c for c in workload["spec"]["template"]["spec"]["containers"]
                  if c.get("command") == ["baton"]]
    assert len(containers) == 1, f"{_workload_id(workload)}: expected one container running `baton`"
    return containers[0]


def _flag_value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    return None


def _env_var_of(container: dict, reference: str) -> dict:
    """The env entry a `$(NAME)` argument expands to."""
    match = re.fullmatch(r"\$\((\w+)\)", reference or "")
    assert match, f"expected a $(VAR) reference, got {reference!r}"
    entries = [e for e in container.get("env", []) if e["name"] == match[1]]
    assert len(entries) == 1, f"{match[1]} is not set once in the container's env"
    return entries[0]


def _worker_sets() -> dict[str, dict]:
    """role -> the StatefulSet running that phase's workers."""
    sets = {}
    for workload in _all("StatefulSet"):
        args = _baton_container(workload)["args"]
        assert args[0] == "worker", f"{_workload_id(workload)} runs `baton {args[0]}`"
        sets[_flag_value(args, "--role")] = workload
    return sets


def _phases(config: dict) -> list[str]:
    return ["colocated"] if config.get("mode") == "colocated" else ["prefill", "decode"]


_K8S_UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
              "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_CONFIG_UNITS = {"": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
                 "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def _quantity(text) -> float:
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    assert match and match[2] in _K8S_UNITS, f"not a Kubernetes quantity: {text!r}"
    return float(match[1]) * _K8S_UNITS[match[2]]


def _config_bytes(text) -> int:
    """A deployment config size ("256MiB", 4096), as ParseByteSize reads it."""
    match = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]*)", str(text))
    assert match and match[2] in _CONFIG_UNITS, f"not a byte size: {text!r}"
    return int(float(match[1]) * _CONFIG_UNITS[match[2]])


def _documented_config_keys() -> tuple[set[str], dict[str, set[str]]]:
    """(top-level keys, section -> its keys), read from the format block of deployment_config.h."""
    text = DEPLOYMENT_CONFIG_H.read_text()
    block = text[text.index("// File format"):text.index("// Default base ports")]
    top: set[str] = set()
    nested: dict[str, set[str]] = {}
    section = None
    for line in block.splitlines():
        match = re.match(r"//( +)([a-z_]+):", line)
        if not match:
            continue
        if len(match[1]) <= 3:
            section = match[2]
            top.add(section)
        else:
            nested.setdefault(section, set()).add(match[2])
    # The header documents prefill's keys once: "same keys for decode and colocated".
    for phase in ("decode", "colocated"):
        top.add(phase)
        nested[phase] = nested["prefill"]
    assert {"model", "host", "prefill", "slo"} <= top and "instances" in nested["prefill"], (
        f"could not read the documented keys from {DEPLOYMENT_CONFIG_H}")
    return top, nested


@pytest.fixture(scope="module")
def cli_flags(baton_binary) -> dict[str, tuple[set[str], set[str]]]:
    """subcommand -> (every flag `--help` lists, the REQUIRED ones)."""
    flags = {}
    for subcommand in ("scheduler", "worker"):
        proc = subprocess.run([str(baton_binary), subcommand, "--help"], capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        known, required = set(), set()
        for line in proc.stdout.splitlines():
            match = re.match(r"\s+(?:-\w,)?(--[a-z][\w-]*)", line)
            if match:
                known.add(match[1])
                if "REQUIRED" in line:
                    required.add(match[1])
        assert "--config" in known, f"could not read the flags of `baton {subcommand} --help`"
        flags[subcommand] = (known, required)
    return flags


@pytest.mark.parametrize("doc", [doc for _, doc in DOCUMENTS], ids=[name for name, _ in DOCUMENTS])
def test_manifest_matches_the_kubernetes_schema(doc):
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate",
        reason="kubernetes-validate is not installed "
               "(pip install -r python_client/requirements-dev.txt)")
    from kubernetes_validate.utils import all_versions

    # It would quietly fall back to another release's schemas.
    if not any(v.startswith(KUBERNETES_VERSION + ".") for v in all_versions()):
        pytest.fail(f"kubernetes-validate {kubernetes_validate.__version__} bundles no Kubernetes "
                    f"{KUBERNETES_VERSION} schemas ({', '.join(all_versions())})", pytrace=False)
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        pytest.fail(f"Kubernetes {error.version} schema: at {where}: {error.message}",
                    pytrace=False)


def test_the_set_is_complete_and_namespace_free():
    kinds = sorted(doc["kind"] for _, doc in DOCUMENTS)
    assert kinds == sorted(["ConfigMap", "Secret", "PersistentVolumeClaim", "Service", "Service",
                            "Service", "Deployment", "StatefulSet", "StatefulSet"]), kinds
    for name, doc in DOCUMENTS:
        # Users pick the namespace with -n; a namespace written here would override it.
        assert "namespace" not in doc["metadata"], name
    assert sorted(_worker_sets()) == ["decode", "prefill"]
    images = {c["image"] for w in WORKLOADS for key in ("initContainers", "containers")
              for c in w["spec"]["template"]["spec"].get(key, [])}
    # One image everywhere, so that the README's one replacement covers every container.
    assert len(images) == 1, images


def test_deployment_config_uses_documented_keys_only():
    top, nested = _documented_config_keys()
    config = _deployment_config()
    assert set(config) <= top, f"undocumented keys: {set(config) - top}"
    for section, value in config.items():
        if isinstance(value, dict):
            assert set(value) <= nested.get(section, set()), (
                f"{section}: undocumented keys {set(value) - nested.get(section, set())}")


@pytest.mark.engine
def test_deployment_config_loads_with_baton(baton_binary, tmp_path):
    config = _deployment_config()
    config_file = tmp_path / CONFIG_KEY
    config_file.write_text(_config_map()["data"][CONFIG_KEY])
    secret_file = tmp_path / "secret"
    secret_file.write_text(os.urandom(32).hex() + "\n")
    secret_file.chmod(0o600)
    for phase in _phases(config):
        # `baton worker` loads and validates the config, then the secret, then checks --instance;
        # an index out of range stops it there, before any model is loaded or port opened.
        proc = subprocess.run([str(baton_binary), "worker", "--config", str(config_file),
                               "--secret-file", str(secret_file), "--role", phase, "--instance", "-1"],
                              capture_output=True, text=True, timeout=30)
        match = re.search(rf"--instance -1: the {phase} phase has (\d+) instances", proc.stderr)
        assert proc.returncode != 0 and match, f"the config does not load:\n{proc.stderr}"
        assert int(match[1]) == config[phase].get("instances", 1)


def test_replicas_equal_instances():
    config = _deployment_config()
    sets = _worker_sets()
    assert sorted(sets) == sorted(_phases(config))
    for phase, workload in sets.items():
        assert workload["spec"]["replicas"] == config[phase].get("instances", 1), (
            f"{_workload_id(workload)}: replicas must equal {phase}.instances in the config")


@pytest.mark.engine
@pytest.mark.parametrize("workload", WORKLOADS, ids=_workload_id)
def test_command_line_uses_known_flags(workload, cli_flags):
    container = _baton_container(workload)
    subcommand, *args = container["args"]
    known, required = cli_flags[subcommand]
    used = {arg.split("=", 1)[0] for arg in args if arg.startswith("--")}
    unknown = used - known
    assert not unknown, f"`baton {subcommand} --help` lists no {sorted(unknown)}"
    assert required <= used, f"`baton {subcommand}` requires {sorted(required - used)}"
    config_path = _flag_value(args, "--config")
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
    mount = str(Path(config_path).parent)
    assert mount in mounts, f"--config {config_path}: nothing is mounted at {mount}"
    assert volumes[mounts[mount]]["configMap"]["name"] == _config_map()["metadata"]["name"]
    assert Path(config_path).name == CONFIG_KEY


def _secret_value() -> str:
    secret = _one("Secret", "baton-deployment-secret")
    return {**secret.get("data", {}), **secret.get("stringData", {})}[SECRET_KEY]


def test_secret_placeholder_is_refused_by_baton():
    # DeploymentSecret::Load wants 32+ printable characters without spaces: a placeholder it refuses
    # cannot end up authenticating a deployment.
    value = _secret_value()
    assert len(value) < 32 or re.search(r"\s", value), f"Baton would accept {value!r}"


def _effective_uid(pod: dict, container: dict):
    pod_uid = pod.get("securityContext", {}).get("runAsUser")
    return container.get("securityContext", {}).get("runAsUser", pod_uid)


def _volume_holding(pod: dict, container: dict, path: str) -> dict:
    mount = next(m for m in container["volumeMounts"]
                 if path.startswith(m["mountPath"].rstrip("/") + "/"))
    return next(v for v in pod["volumes"] if v["name"] == mount["name"])


@pytest.mark.parametrize("workload", WORKLOADS, ids=_workload_id)
def test_secret_file_is_readable_by_its_owner_only(workload):
    pod = workload["spec"]["template"]["spec"]
    container = _baton_container(workload)
    path = _flag_value(container["args"], "--secret-file")
    volume = _volume_holding(pod, container, path)
    uid = _effective_uid(pod, container)
    assert uid is not None, "runAsUser must be explicit: the secret file's owner depends on it"
    secret_name = _one("Secret", "baton-deployment-secret")["metadata"]["name"]
    if "secret" in volume:
        # kubelet writes secret files as root; fsGroup adds group read to them (kubernetes#57923).
        mode = volume["secret"].get("defaultMode", 0o644)
        assert volume["secret"]["secretName"] == secret_name
        assert mode & 0o077 == 0 and uid == 0 and "fsGroup" not in pod.get("securityContext", {})
        return
    assert volume.get("emptyDir", {}).get("medium") == "Memory", "a copy must not reach the node's disk"
    writers = [c for c in pod.get("initContainers", [])
               if any(m["name"] == volume["name"] for m in c.get("volumeMounts", []))]
    assert len(writers) == 1, "expected one init container writing the secret file"
    command = writers[0]["command"] + writers[0].get("args", [])
    assert command[0] == "install" and command[-1] == path, command
    assert _flag_value(command, "-m") in ("0400", "0600"), command
    assert _effective_uid(pod, writers[0]) == uid, "the copy must belong to the user baton runs as"
    source = command[-2]
    assert _volume_holding(pod, writers[0], source)["secret"]["secretName"] == secret_name
    assert Path(source).name == SECRET_KEY


def test_scheduler_service_exposes_the_config_ports():
    config = _deployment_config()
    ports = {"grpc": config.get("scheduler_port", 50051), "http": config.get("http_port", 8000),
             "registry": config["internal_port"]}
    scheduler = _one("Deployment", "baton-scheduler")
    container = _baton_container(scheduler)
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = _one("Service", "baton-scheduler")
    pod_labels = scheduler["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    for port in service["spec"]["ports"]:
        assert port["port"] == ports[port["name"]] == container_ports[port["targetPort"]], port
    assert sorted(p["name"] for p in service["spec"]["ports"]) == sorted(ports)
    # The scheduler is Ready only once workers have registered, through this Service.
    assert service["spec"].get("publishNotReadyAddresses") is True
    assert scheduler["spec"]["replicas"] == 1, "workers must all register with the same scheduler"
    assert container["readinessProbe"]["httpGet"]["port"] == "http"


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_worker_pod_wiring(phase):
    config = _deployment_config()
    section = config[phase]
    workload = _worker_sets()[phase]
    spec = workload["spec"]
    pod = spec["template"]["spec"]
    container = _baton_container(workload)
    args = container["args"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert _one("Service", spec["serviceName"])["spec"].get("clusterIP") == "None"
    assert spec.get("podManagementPolicy") == "Parallel"

    index = _env_var_of(container, _flag_value(args, "--instance"))
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']")
    advertise = _env_var_of(container, _flag_value(args, "--advertise"))
    assert advertise["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert _flag_value(args, "--host") == "0.0.0.0"
    registry_host, registry_port = _flag_value(args, "--scheduler").rsplit(":", 1)
    assert int(registry_port) == config["internal_port"]
    registry = _one("Service", registry_host)
    assert config["internal_port"] in [p["port"] for p in registry["spec"]["ports"]]
    base_port = {e["name"]: e.get("value") for e in container["env"]}["BATON_BASE_PORT"]
    assert int(base_port) == section["base_port"], "the probes' port must follow the config"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert "$((BATON_BASE_PORT + POD_INDEX))" in " ".join(container[probe]["exec"]["command"])

    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    model = Path(config["model"])
    assert model.is_absolute()
    model_mount = next((m for path, m in mounts.items() if model.is_relative_to(path)), None)
    assert model_mount and model_mount.get("readOnly"), f"model {model}: not on a read-only mount"
    assert "persistentVolumeClaim" in volumes[model_mount["name"]]

    resources = container["resources"]
    kv_bytes = _config_bytes(section.get("kv_cache_bytes", "256MiB"))
    ranks_threads = section.get("tp", 1) * section.get("pp", 1) * section.get("threads", 1)
    assert _quantity(resources["requests"]["cpu"]) >= ranks_threads, "cpu: tp x pp x threads"
    assert _quantity(resources["limits"]["memory"]) > kv_bytes
    if phase == "prefill":
        # The KV pools are shared-memory segments, allocated up front.
        shm = volumes[mounts["/dev/shm"]["name"]]["emptyDir"]
        assert shm["medium"] == "Memory" and _quantity(shm["sizeLimit"]) > kv_bytes
