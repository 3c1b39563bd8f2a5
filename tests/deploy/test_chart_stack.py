"""The chart with its dependencies: the CloudNativePG `Cluster` and OpenSearch, wired to the service.

Four renders: the defaults (one pod on the embedded engines with a volume), the quickstart
(values-quickstart.yaml: one PostgreSQL instance, single-node OpenSearch), production with the bundled
databases (ci/production-stack-values.yaml) and production with external databases
(ci/production-values.yaml). Names of the dependencies' objects are read from the render, never spelled
here: the service must follow whatever the dependency charts and CloudNativePG's naming convention produce.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from prometheus_client import REGISTRY

import app.observability.metrics  # noqa: F401 - importing it registers the `poimen_` metric objects
from app.config import Settings, shared_database_problem
from app.engines.opensearch_mapping import FIRST_UNAMBIGUOUS_VERSION, alias_indexes_pattern, versioned_index_name
from app.engines.opensearch_projects import project_alias, project_aliases_pattern, shared_index_names
from tests.deploy.conftest import HELM_DEPS
from tests.deploy.test_chart import (
    CHART,
    HELM,
    INSTALL_HINT,
    ROOT,
    Manifest,
    find,
    helm_fails,
    helm_template,
    main_container,
    tool,
)
from tests.deploy.test_dashboard import METRIC_CONTRACT

pytestmark = pytest.mark.slow

QUICKSTART_VALUES = CHART / "values-quickstart.yaml"
STACK_VALUES = CHART / "ci" / "production-stack-values.yaml"
RENDERS = {
    "default": CHART / "ci" / "default-values.yaml",
    "production": CHART / "ci" / "production-values.yaml",
    "quickstart": QUICKSTART_VALUES,
    "production-stack": STACK_VALUES,
}
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
CNPG_CRDS = HELM_DEPS / "cloudnative-pg-1.30.0-crds.yaml"
RULE_TESTS = Path(__file__).with_name("prometheus-rules.test.yaml")
CRD_KINDS = {"Cluster", "PrometheusRule", "ServiceMonitor"}

requires_helm = pytest.mark.skipif(HELM is None, reason=f"helm not installed: {INSTALL_HINT}")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    return subprocess.run([HELM, *args], capture_output=True, text=True, check=False, timeout=180)


@pytest.fixture(scope="module")
def quickstart_render() -> list[Manifest]:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    return helm_template("--values", str(QUICKSTART_VALUES))


@pytest.fixture(scope="module")
def stack_render() -> list[Manifest]:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    return helm_template("--values", str(STACK_VALUES))


def env_of(container: Manifest) -> dict[str, Manifest]:
    return {item["name"]: item for item in container.get("env", [])}


def dependency_objects(manifests: list[Manifest], name: str) -> list[Manifest]:
    """Objects rendered by a dependency chart, told apart by its `app.kubernetes.io/name` label."""
    return [m for m in manifests if m["metadata"].get("labels", {}).get("app.kubernetes.io/name") == name]


def opensearch_client_service(manifests: list[Manifest]) -> Manifest:
    services = [
        m
        for m in dependency_objects(manifests, "opensearch")
        if m["kind"] == "Service" and m["spec"].get("clusterIP") != "None"
    ]
    assert len(services) == 1, [s["metadata"]["name"] for s in services]
    return services[0]


# --- every render is clean ------------------------------------------------------------------------------


@requires_helm
@pytest.mark.parametrize("render", sorted(RENDERS))
def test_helm_lint_strict_passes(render: str) -> None:
    result = helm("lint", "--strict", str(CHART), "--values", str(RENDERS[render]))

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


@requires_helm
@pytest.mark.parametrize("render", sorted(RENDERS))
def test_every_builtin_kind_passes_kubernetes_validate(render: str, tmp_path: Path) -> None:
    validator = tool("kubernetes-validate")
    if validator is None:
        pytest.skip(f"kubernetes-validate not installed: {INSTALL_HINT}")
    rendered = helm("template", "poimen-memory", str(CHART), "--namespace", "search", "--values", str(RENDERS[render]))
    assert rendered.returncode == 0, rendered.stderr
    (tmp_path / "render.yaml").write_text(rendered.stdout)

    result = subprocess.run(
        [validator, "--kubernetes-version", "1.35.0", "--strict", "--quiet", str(tmp_path / "render.yaml")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if re.match(r"^(WARN|ERROR)", line) and not any(f"schema for kind {kind} with" in line for kind in CRD_KINDS)
    ]
    assert problems == []


def crd_schema(kind: str, group: str, version: str) -> dict[str, Any]:
    for document in yaml.safe_load_all(CNPG_CRDS.read_text(encoding="utf-8")):
        if document and document["spec"]["group"] == group and document["spec"]["names"]["kind"] == kind:
            for served in document["spec"]["versions"]:
                if served["name"] == version:
                    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
                    return schema
    raise AssertionError(f"no {kind}.{group}/{version} in {CNPG_CRDS}")


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the API server would prune: not in the structural schema (jsonschema accepts them)."""
    found: list[str] = []
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields") or "additionalProperties" in schema:
            return found
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key not in properties:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(item, properties[key], f"{path}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


@pytest.mark.parametrize("render", ["quickstart_render", "stack_render"])
def test_cluster_validates_against_the_cloudnative_pg_crd(render: str, request: pytest.FixtureRequest) -> None:
    if not CNPG_CRDS.exists():
        pytest.skip(f"{CNPG_CRDS} not found (../shared/helm-deps beside the repository, or HELM_DEPS_DIR)")
    cluster = find(request.getfixturevalue(render), "Cluster")
    schema = crd_schema("Cluster", "postgresql.cnpg.io", "v1")

    jsonschema.Draft7Validator(schema).validate(cluster)
    assert unknown_fields(cluster["spec"], schema["properties"]["spec"], "spec") == []
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"


# --- the quickstart: wired to what the dependencies render -----------------------------------------------


def test_quickstart_env_points_at_the_rendered_dependencies(quickstart_render: list[Manifest]) -> None:
    cluster_name = find(quickstart_render, "Cluster")["metadata"]["name"]
    service = opensearch_client_service(quickstart_render)
    http_port = next(port["port"] for port in service["spec"]["ports"] if port["name"] == "http")
    statefulset = find(quickstart_render, "StatefulSet")
    opensearch_env = env_of(statefulset["spec"]["template"]["spec"]["containers"][0])
    env = env_of(main_container(quickstart_render))

    # CloudNativePG's convention: the primary `<cluster>-rw`; the service logs in as the runtime role
    # (tests/deploy/test_chart_runtime_role.py), the migrations Job as the owner from `<cluster>-app`.
    assert env["DATABASE_URL"]["value"].startswith("postgresql://poimen_runtime:$(POIMEN_DATABASE_RUNTIME_PASSWORD)@")
    assert f"@{cluster_name}-rw.search.svc:5432/app" in env["DATABASE_URL"]["value"]
    # The OpenSearch Service the opensearch chart renders, its protocol and HTTP port.
    assert env["OPENSEARCH_URL"]["value"] == f"https://{service['metadata']['name']}.search.svc:{http_port}"
    # One Secret starts OpenSearch (initial admin password) and authenticates the service.
    admin_ref = opensearch_env["OPENSEARCH_INITIAL_ADMIN_PASSWORD"]["valueFrom"]["secretKeyRef"]
    credentials = next(
        m for m in quickstart_render if m["kind"] == "Secret" and m["metadata"]["name"] == admin_ref["name"]
    )
    assert env["OPENSEARCH_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": admin_ref["name"],
        "key": admin_ref["key"],
    }
    assert env["OPENSEARCH_USERNAME"]["valueFrom"]["secretKeyRef"]["name"] == admin_ref["name"]
    assert set(credentials["data"]) == {"username", "password"}
    assert credentials["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


@pytest.mark.parametrize("render", ["quickstart_render", "stack_render"])
def test_new_server_pods_wait_for_the_postgresql_primary_and_not_for_opensearch(
    render: str, request: pytest.FixtureRequest
) -> None:
    manifests: list[Manifest] = request.getfixturevalue(render)
    cluster_name = find(manifests, "Cluster")["metadata"]["name"]
    init_containers = find(manifests, "Deployment")["spec"]["template"]["spec"]["initContainers"]

    # The service cannot start without PostgreSQL; without OpenSearch it starts with its lexical leg degraded
    # and prepares the indexes once it answers, so waiting for OpenSearch only held new pods back in an outage.
    # A TCP connect is enough: `<cluster>-rw` has an endpoint only while CloudNativePG's readiness probe finds
    # the primary accepting connections.
    assert [c["name"] for c in init_containers] == ["wait-for-backends"]
    assert env_of(init_containers[0])["WAIT_FOR"]["value"].split() == [f"{cluster_name}-rw.search.svc:5432"]


def test_quickstart_is_one_of_each_with_auth_on(quickstart_render: list[Manifest]) -> None:
    cluster = find(quickstart_render, "Cluster")
    statefulset = find(quickstart_render, "StatefulSet")
    config = find(quickstart_render, "ConfigMap", "-env")["data"]
    chart_secret = find(quickstart_render, "Secret", "poimen-memory")
    env = env_of(main_container(quickstart_render))
    migrate = find(quickstart_render, "Job", "-migrate")

    assert find(quickstart_render, "Deployment")["spec"]["replicas"] == 1
    assert cluster["spec"]["instances"] == 1
    assert statefulset["spec"]["replicas"] == 1
    assert {"name": "discovery.type", "value": "single-node"} in statefulset["spec"]["template"]["spec"]["containers"][
        0
    ]["env"]
    # pgvector: an image flavour that ships it, and the extension created by the superuser at bootstrap.
    assert "minimal" not in cluster["spec"]["imageName"]
    assert "CREATE EXTENSION IF NOT EXISTS vector;" in cluster["spec"]["bootstrap"]["initdb"]["postInitApplicationSQL"]
    assert cluster["spec"]["bootstrap"]["initdb"]["owner"] == cluster["spec"]["bootstrap"]["initdb"]["database"]
    # The source of truth outlives `helm uninstall`, as OpenSearch's volumes do.
    assert cluster["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # Caller auth with the HS256 key the chart generates.
    assert config["AUTH_MODE"] == "jwt"
    assert env["JWT_SECRET"]["valueFrom"]["secretKeyRef"] == {
        "name": chart_secret["metadata"]["name"],
        "key": "JWT_SECRET",
    }
    assert len(chart_secret["data"]["JWT_SECRET"]) >= 64  # base64 of 48 generated characters
    # The relaxed TLS choice is explicit, and the Job migrates the bundled database.
    assert config["OPENSEARCH_VERIFY_CERTS"] == "false"
    assert migrate["metadata"]["annotations"]["helm.sh/hook"] == "post-install,pre-upgrade"  # the Cluster exists then
    job_env = env_of(migrate["spec"]["template"]["spec"]["containers"][0])
    assert job_env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == f"{cluster['metadata']['name']}-app"
    assert not any(m["kind"] == "PersistentVolumeClaim" for m in quickstart_render)  # nothing on /data


@pytest.mark.parametrize("render", ["quickstart_render", "stack_render"])
def test_rendered_stack_env_is_accepted_by_the_app(
    render: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests: list[Manifest] = request.getfixturevalue(render)
    config = find(manifests, "ConfigMap", "-env")["data"]
    field_env_names = {name.upper() for name in Settings.model_fields}
    for name in list(os.environ):
        if name.upper() in field_env_names:
            monkeypatch.delenv(name)
    stand_ins = {"DATABASE_URL": "postgresql://app:x@db-rw.search:5432/app", "JWT_SECRET": "x" * 48}

    for name, value in config.items():
        monkeypatch.setenv(name, value)
    for item in main_container(manifests)["env"]:
        monkeypatch.setenv(item["name"], item.get("value", stand_ins.get(item["name"], "from-a-secret")))
    settings = Settings(_env_file=None)

    assert set(config) <= field_env_names
    assert shared_database_problem(settings) is None
    assert settings.database_url is not None
    assert settings.opensearch_url is not None
    assert settings.opensearch_auth == "basic"


# --- production with the bundled databases -----------------------------------------------------------


def test_production_stack_is_highly_available(stack_render: list[Manifest]) -> None:
    cluster = find(stack_render, "Cluster")
    statefulset = find(stack_render, "StatefulSet")
    opensearch_affinity = statefulset["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    budgets = [m for m in stack_render if m["kind"] == "PodDisruptionBudget"]
    env = env_of(main_container(stack_render))
    config = find(stack_render, "ConfigMap", "-env")["data"]

    assert cluster["spec"]["instances"] == 3
    assert cluster["spec"]["enablePDB"] is True  # CloudNativePG creates the database's PDBs itself
    assert cluster["spec"]["affinity"]["podAntiAffinityType"] == "required"
    assert statefulset["spec"]["replicas"] == 3
    assert "requiredDuringSchedulingIgnoredDuringExecution" in opensearch_affinity
    assert {b["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") for b in budgets} == {
        "poimen-memory",
        "opensearch",
    }
    assert find(stack_render, "HorizontalPodAutoscaler")["spec"]["minReplicas"] == 3
    # TLS verified against the CA Secret the user created; no demo password Secret, no credential rendered at all.
    assert config["OPENSEARCH_VERIFY_CERTS"] == "true"
    assert env["OPENSEARCH_CA_FILE"]["value"].startswith("/etc/poimen/opensearch-ca/")
    secrets = [m for m in stack_render if m["kind"] == "Secret"]
    assert sorted(sorted(m["stringData"]) for m in secrets) == [["roles.yml"], ["roles_mapping.yml"]]  # roles only


def restricted_violations(spec: Manifest) -> list[str]:
    """What in a pod spec breaks the restricted Pod Security Standard (or runs as root), container by container."""
    pod = spec.get("securityContext", {})
    found = [f"pod: {key}" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    found += [f"volume {v['name']}: hostPath" for v in spec.get("volumes", []) if "hostPath" in v]
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        context = container.get("securityContext", {})

        def effective(key: str, context: Manifest = context) -> Any:
            return context.get(key, pod.get(key))

        name = container["name"]
        if effective("runAsNonRoot") is not True:
            found.append(f"{name}: runAsNonRoot not true")
        if effective("runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        if context.get("privileged"):
            found.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation not false")
        if "ALL" not in context.get("capabilities", {}).get("drop", []):
            found.append(f"{name}: capabilities not dropped")
        if set(context.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added")
        if (effective("seccompProfile") or {}).get("type") not in {"RuntimeDefault", "Localhost"}:
            found.append(f"{name}: no seccompProfile")
    return found


def cluster_chart_ping_test(manifest: Manifest) -> bool:
    """The cluster chart's `helm test` Job: alpine as root, `apk add` from the internet. No value turns it off or
    hardens it; only `helm test` without --filter creates it (docs/deploy.md)."""
    metadata = manifest["metadata"]
    return metadata["name"].endswith("-ping-test") and metadata.get("annotations", {}).get("helm.sh/hook") == "test"


@pytest.mark.parametrize("render", ["quickstart_render", "stack_render"])
def test_every_pod_of_the_stack_runs_restricted_and_opensearch_writes_its_volume_by_fs_group(
    render: str, request: pytest.FixtureRequest
) -> None:
    manifests: list[Manifest] = request.getfixturevalue(render)
    specs = {
        f"{m['kind']}/{m['metadata']['name']}": m["spec"] if m["kind"] == "Pod" else m["spec"]["template"]["spec"]
        for m in manifests
        if m["kind"] in {"Deployment", "StatefulSet", "Job", "Pod"} and not cluster_chart_ping_test(m)
    }
    statefulset = find(manifests, "StatefulSet")
    opensearch_pod = statefulset["spec"]["template"]["spec"]
    opensearch = next(c for c in opensearch_pod["containers"] if c["name"] == "opensearch")
    data_mount = next(m for m in opensearch["volumeMounts"] if m["mountPath"] == "/usr/share/opensearch/data")

    assert {name: restricted_violations(spec) for name, spec in specs.items()} == {name: [] for name in specs}
    assert "StatefulSet/opensearch-cluster-master" in specs
    # No root chown of the data volume: the kubelet gives it the pod's fsGroup, OpenSearch's own group (1000).
    assert [c["name"] for c in opensearch_pod.get("initContainers", [])] == ["configfile"]
    assert data_mount["name"] in [t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]]
    assert opensearch_pod["securityContext"]["fsGroup"] == opensearch["securityContext"]["runAsUser"] == 1000


@requires_helm
@pytest.mark.parametrize("render", ["production", "production-stack"])
def test_production_values_turn_the_console_off(render: str) -> None:
    config = find(helm_template("--values", str(RENDERS[render])), "ConfigMap", "-env")["data"]

    # People paste bearer tokens into it, on the API's own origin (docs/security.md): not in production.
    assert config["CONSOLE_ENABLED"] == "false"


@requires_helm
def test_service_pods_keep_apart_by_the_deployments_own_selector_whatever_the_release_name() -> None:
    result = helm("template", "search-prod", str(CHART), "--namespace", "search", "--values", str(STACK_VALUES))
    assert result.returncode == 0, result.stderr
    deployment = find([m for m in yaml.safe_load_all(result.stdout) if m], "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    anti_affinity = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    terms = anti_affinity["preferredDuringSchedulingIgnoredDuringExecution"]

    assert selector["app.kubernetes.io/instance"] == "search-prod"
    assert [term["podAffinityTerm"]["labelSelector"] for term in terms] == [{"matchLabels": selector}]


OPENSEARCH_ACTION_GROUPS = {
    # The static action groups the role uses, as OpenSearch's security plugin defines them
    # (opensearch-project/security src/main/resources/static_config/static_action_groups.yml).
    "crud": ["read", "write"],
    "read": ["indices:data/read*", "indices:admin/mappings/fields/get*", "indices:admin/resolve/index"],
    "write": ["indices:data/write*", "indices:admin/mapping/put"],
    "create_index": ["indices:admin/create", "indices:admin/mapping/put"],
    "manage_aliases": ["indices:admin/aliases*"],
    "cluster_composite_ops": [
        "indices:data/write/bulk", "indices:admin/aliases*", "indices:data/write/reindex", "cluster_composite_ops_ro",
    ],
    "cluster_composite_ops_ro": [
        "indices:data/read/mget", "indices:data/read/msearch", "indices:data/read/mtv", "indices:admin/aliases/exists*",
        "indices:admin/aliases/get*", "indices:data/read/scroll", "indices:admin/resolve/index",
    ],
}  # fmt: skip


def opensearch_wildcard(pattern: str, name: str) -> bool:
    """OpenSearch's WildcardMatcher for plain patterns: `*` any run, `?` one character, nothing else special."""
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."), name) is not None


def grants(allowed_actions: list[str], action: str) -> bool:
    for allowed in allowed_actions:
        if allowed in OPENSEARCH_ACTION_GROUPS:
            if grants(OPENSEARCH_ACTION_GROUPS[allowed], action):
                return True
        elif opensearch_wildcard(allowed, action):
            return True
    return False


def index_action_granted(role: Manifest, index: str, action: str) -> bool:
    return any(
        grants(block["allowed_actions"], action)
        for block in role.get("index_permissions", [])
        if any(opensearch_wildcard(pattern, index) for pattern in block["index_patterns"])
    )


def bundled_security_files(manifests: list[Manifest]) -> dict[str, Manifest]:
    """The OpenSearch security files the release mounts over the image's own, by file name, parsed."""
    statefulset = find(manifests, "StatefulSet")
    spec = statefulset["spec"]["template"]["spec"]
    container = next(c for c in spec["containers"] if c["name"] == "opensearch")
    secrets = {volume["name"]: volume["secret"]["secretName"] for volume in spec["volumes"] if "secret" in volume}
    rendered = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "Secret"}
    files = {}
    for mount in container["volumeMounts"]:
        directory, _, file_name = mount["mountPath"].rpartition("/")
        if directory == "/usr/share/opensearch/config/opensearch-security" and secrets.get(mount["name"]) in rendered:
            assert mount["subPath"] == file_name, mount
            files[file_name] = yaml.safe_load(rendered[secrets[mount["name"]]]["stringData"][file_name])
    return files


def test_the_services_opensearch_user_may_do_what_the_service_does_on_its_own_indexes_only(
    stack_render: list[Manifest],
) -> None:
    # The user docs/deploy.md has you put in the Secret the service logs in with (opensearchCredentials).
    user = re.search(r"secret generic poimen-memory-opensearch --from-literal=username=(\w+)", DEPLOY_DOC.read_text())
    assert user is not None
    files = bundled_security_files(stack_render)
    base = find(stack_render, "ConfigMap", "-env")["data"]["OPENSEARCH_INDEX"]
    alias = project_alias(base, "Notes")
    project_names = [alias, versioned_index_name(alias), versioned_index_name(alias, FIRST_UNAMBIGUOUS_VERSION - 1)]
    # app/engines/opensearch*.py, call by call.
    project_actions = [
        "indices:admin/create",  # ensure_index: the index with its alias
        "indices:admin/aliases",  # put_alias, update_aliases (a schema upgrade moves the alias)
        "indices:admin/aliases/get",  # get_alias, exists_alias
        "indices:admin/get",  # indices.exists
        "indices:admin/mappings/get",  # the schema version check
        "indices:monitor/settings/get",  # the generation check (index uuid)
        "indices:admin/settings/update",  # the write block before an upgrade's copy
        "indices:admin/refresh",  # before the copy
        "indices:data/read/search",  # searches; the source of _reindex and _delete_by_query
        "indices:data/read/mget[shard]",  # version markers
        "indices:data/write/bulk[s]",  # chunks and markers
        "indices:data/write/index",
        "indices:data/write/delete",
        "indices:data/write/delete/byquery",  # stale chunks
        "indices:admin/delete",  # a project's index, with the project
    ]
    cluster_actions = [
        "cluster:monitor/main",  # info() at start, ping() for /readyz
        "indices:data/write/bulk",
        "indices:data/read/mget",
        "indices:data/write/reindex",
        "indices:data/read/scroll",
        "indices:data/read/scroll/clear",
    ]
    not_the_services = [".opendistro_security", "logs-2026.05", f"{base}-other", f"{base}x", "poimen"]
    # Another deployment's on the same cluster, with a base that starts with this one's (docs/operations.md).
    for other_base in (f"{base}-v2", f"{base}-v6", f"{base}-staging", f"{base}-prod", f"{base}-pp", f"{base}-p2"):
        other_alias = project_alias(other_base, "notes")
        not_the_services += [other_alias, versioned_index_name(other_alias), versioned_index_name(other_base, 6)]

    assert set(files) == {"roles.yml", "roles_mapping.yml"}  # internal_users.yml is the Secret you create
    mapped = [name for name, mapping in files["roles_mapping.yml"].items() if user.group(1) in mapping.get("users", [])]
    assert len(mapped) == 1, mapped
    role = files["roles.yml"][mapped[0]]
    for action in cluster_actions:
        assert grants(role["cluster_permissions"], action), action
    for name in project_names:
        for action in project_actions:
            assert index_action_granted(role, name, action), (name, action)
    # A start finds the alias `base` on the shared index of schema 6 and before, takes it off, reads no document.
    for name in (base, versioned_index_name(base, 6)):
        assert index_action_granted(role, name, "indices:admin/aliases/get"), name
        assert index_action_granted(role, name, "indices:admin/aliases"), name
        assert not index_action_granted(role, name, "indices:data/read/search"), name
    # Each alias read names its indexes (app/engines/opensearch_lifecycle.py): the patterns it sends are granted.
    for pattern in (project_aliases_pattern(base), alias_indexes_pattern(alias), *shared_index_names(base)):
        assert index_action_granted(role, pattern, "indices:admin/aliases/get"), pattern
    # Anything else: nothing, not even alias or index names (every alias read names the service's own indexes).
    for name in not_the_services:
        granted = [a for a in [*project_actions, "indices:data/read/get"] if index_action_granted(role, name, a)]
        assert granted == [], (name, granted)
    # The image's own mapping, which this file replaces, gave the backend role admin all_access: kept.
    assert files["roles_mapping.yml"]["all_access"]["backend_roles"] == ["admin"]


@requires_helm
def test_the_opensearch_role_names_the_indexes_the_service_is_configured_with() -> None:
    # One value: the role's index patterns are made from the service's own OPENSEARCH_INDEX, never typed apart.
    render = helm_template("--values", str(STACK_VALUES), "--set", "config.OPENSEARCH_INDEX=acme-memory")

    role = bundled_security_files(render)["roles.yml"]["poimen_service"]
    patterns = sorted(pattern for block in role["index_permissions"] for pattern in block["index_patterns"])
    assert find(render, "ConfigMap", "-env")["data"]["OPENSEARCH_INDEX"] == "acme-memory"
    assert patterns == sorted(["acme-memory", "acme-memory-p-*", *shared_index_names("acme-memory")])
    assert "poimen-chunks" not in yaml.safe_dump(role)


@requires_helm
@pytest.mark.parametrize("base", ["poimen-p", "poimen-p-staging"])
def test_an_index_base_another_deployments_names_could_start_with_is_refused_as_the_service_refuses_it(
    base: str,
) -> None:
    # Its role's `<base>-p-*` would hold the indexes of a deployment on `poimen` (`poimen-p-p-<project>`), and back.
    stderr = helm_fails("--values", str(STACK_VALUES), "--set", f"config.OPENSEARCH_INDEX={base}")

    assert "OPENSEARCH_INDEX" in stderr
    with pytest.raises(ValueError, match="must not contain '-p-' nor end with '-p'"):
        Settings(_env_file=None, opensearch_index=base)


ROLE_REFUSED = {
    "no bundled OpenSearch": (
        ["--set", "opensearch.enabled=false", "--set", "config.OPENSEARCH_URL=https://search.example:9200"],
        "it needs opensearch.enabled=true",
    ),
    "rolesSecret names another Secret": (
        ["--set", "opensearch.securityConfig.rolesSecret=my-roles"],
        "opensearch.securityConfig.rolesSecret must name it (poimen-memory-opensearch-roles)",
    ),
    "roles.yml in the opensearch chart's data too": (
        ["--set", "opensearch.securityConfig.config.data.roles\\.yml=x"],
        "leave it out of opensearch.securityConfig.config.data",
    ),
    "no index configured": (["--set", "config.OPENSEARCH_INDEX="], "from config.OPENSEARCH_INDEX: set it"),
    "the index from extraEnv": (
        ["--set", "extraEnv[0].name=OPENSEARCH_INDEX", "--set", "extraEnv[0].value=other"],
        "set the index there, not in extraEnv",
    ),
}


@requires_helm
@pytest.mark.parametrize(("args", "reason"), ROLE_REFUSED.values(), ids=ROLE_REFUSED.keys())
def test_a_role_the_bundled_opensearch_would_not_apply_as_rendered_is_refused(args: list[str], reason: str) -> None:
    stderr = helm_fails("--values", str(STACK_VALUES), *args)

    assert "opensearchRole.create=true" in stderr
    assert reason in stderr


@requires_helm
def test_production_stack_networkpolicy_allows_exactly_the_bundled_databases(stack_render: list[Manifest]) -> None:
    cluster_name = find(stack_render, "Cluster")["metadata"]["name"]
    opensearch_labels = find(stack_render, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    policy = next(m for m in stack_render if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == "poimen-memory")
    peers = {rule["ports"][0]["port"]: rule.get("to") for rule in policy["spec"]["egress"]}

    assert peers[5432] == [{"podSelector": {"matchLabels": {"cnpg.io/cluster": cluster_name}}}]
    assert peers[9200][0]["podSelector"]["matchLabels"].items() <= opensearch_labels.items()


# --- renders that must not happen ---------------------------------------------------------------------


EMBEDDED_WITH_REPLICAS = {
    "defaults, 2 replicas": ["--set", "replicaCount=2"],
    "defaults, autoscaling": ["--set", "autoscaling.enabled=true"],
    "embeddedDatabase flag, 3 replicas": [
        "--set",
        "existingSecret=creds",
        "--set",
        "embeddedDatabase=true",
        "--set",
        "replicaCount=3",
    ],
    "production values, embeddedDatabase": ["--values", str(RENDERS["production"]), "--set", "embeddedDatabase=true"],
    "OpenSearch bundled but no database": [
        "--values",
        str(QUICKSTART_VALUES),
        "--set",
        "postgresql.enabled=false",
        "--set",
        "replicaCount=2",
    ],
}


@requires_helm
@pytest.mark.parametrize("args", EMBEDDED_WITH_REPLICAS.values(), ids=EMBEDDED_WITH_REPLICAS.keys())
def test_embedded_database_with_more_than_one_replica_does_not_render(args: list[str]) -> None:
    result = helm("template", "poimen-memory", str(CHART), "--namespace", "search", *args)

    assert result.returncode != 0
    assert "the embedded database" in result.stderr
    assert "set replicaCount=1 and autoscaling.enabled=false" in result.stderr
    assert "postgresql.enabled=true" in result.stderr


SHARED_DATABASE_WITHOUT_OPENSEARCH = {
    "secret.databaseUrl": ["--set", "secret.databaseUrl=postgresql://u:p@db:5432/app"],
    "existingSecret": ["--set", "existingSecret=creds"],
    "CloudNativePG": ["--set", "postgresql.enabled=true"],
    "production values without OPENSEARCH_URL": [
        "--values",
        str(RENDERS["production"]),
        "--set",
        "config.OPENSEARCH_URL=",
    ],
}


@requires_helm
@pytest.mark.parametrize(
    "args", SHARED_DATABASE_WITHOUT_OPENSEARCH.values(), ids=SHARED_DATABASE_WITHOUT_OPENSEARCH.keys()
)
def test_shared_database_without_opensearch_does_not_render(args: list[str]) -> None:
    result = helm("template", "poimen-memory", str(CHART), "--namespace", "search", *args)

    assert result.returncode != 0
    assert "needs a shared OpenSearch too" in result.stderr
    assert "opensearch.enabled=true or config.OPENSEARCH_URL" in result.stderr


@requires_helm
def test_the_bundled_opensearch_alone_logs_in_and_says_loudly_that_tls_is_unverified() -> None:
    result = helm(
        "install", "x", str(CHART), "--dry-run=client", "--set", "postgresql.enabled=true",
        "--set", "opensearch.enabled=true",
    )  # fmt: skip
    with_ca = helm(
        "template", "x", str(CHART), "--set", "postgresql.enabled=true", "--set", "opensearch.enabled=true",
        "--set", "opensearchCa.secretName=opensearch-ca",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    manifest, notes = result.stdout.split("NOTES:", 1)
    env = {
        item["name"]: item.get("value")
        for document in yaml.safe_load_all(manifest.split("MANIFEST:", 1)[-1])
        if document and document.get("kind") == "Deployment"
        for container in document["spec"]["template"]["spec"]["containers"]
        for item in container.get("env", [])
    }
    assert env["OPENSEARCH_AUTH"] == "basic"  # the security plugin is on: the generated user, not none
    assert env["OPENSEARCH_VERIFY_CERTS"] == "false"
    assert "WARNING: OPENSEARCH_VERIFY_CERTS=false" in notes
    assert with_ca.returncode == 0, with_ca.stderr
    assert "OPENSEARCH_VERIFY_CERTS" not in with_ca.stdout.split("kind: Deployment", 1)[1].split("---", 1)[0]


@requires_helm
def test_an_explicit_verify_certs_true_with_the_bundled_opensearch_is_kept() -> None:
    # Certificates of a CA the image trusts need no opensearchCa; "true" was silently turned into "false".
    result = helm(
        "template", "x", str(CHART), "--set", "postgresql.enabled=true", "--set", "opensearch.enabled=true",
        "--set-string", "config.OPENSEARCH_VERIFY_CERTS=true",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    deployment = result.stdout.split("kind: Deployment", 1)[1].split("---", 1)[0]
    assert "OPENSEARCH_VERIFY_CERTS" not in deployment  # the ConfigMap's "true" stands
    assert 'OPENSEARCH_VERIFY_CERTS: "true"' in result.stdout


# --- NOTES.txt ---------------------------------------------------------------------------------------


@requires_helm
def test_notes_warn_when_the_cloudnative_pg_crd_is_absent() -> None:
    def notes(*args: str) -> str:
        result = helm(
            "install", "poimen-memory", str(CHART), "--namespace", "search", "--dry-run=client",
            "--values", str(QUICKSTART_VALUES), *args,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result.stdout.split("NOTES:", 1)[1]

    offline = notes()  # --dry-run=client knows no CRD: what a cluster without the operator reports
    without_database = notes("--set", "postgresql.enabled=false", "--set", "opensearch.enabled=false")
    template = (CHART / "templates" / "NOTES.txt").read_text(encoding="utf-8")

    assert "the CloudNativePG CRDs (postgresql.cnpg.io/v1) are not installed" in offline
    assert "helm upgrade --install cnpg cloudnative-pg" in offline
    assert '.Capabilities.APIVersions.Has "postgresql.cnpg.io/v1"' in template  # silent once the operator is there
    assert "CloudNativePG CRDs" not in without_database
    assert "OPENSEARCH_VERIFY_CERTS=false" in offline
    for doc in set(re.findall(r"docs/[\w./-]+\.md", offline + without_database)):
        assert (ROOT / doc).is_file(), doc
    assert "docs/deploy.md" in offline


# --- alerts -------------------------------------------------------------------------------------------


def rendered_rules(directory: Path) -> Path:
    rule = find(
        helm_template("--values", str(STACK_VALUES), "--show-only", "templates/prometheusrule.yaml"), "PrometheusRule"
    )
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


@requires_helm
def test_every_alert_passes_promtool_unit_tests(tmp_path: Path) -> None:
    promtool = tool("promtool")
    if promtool is None:
        pytest.skip("promtool not installed: `make install-tools` as root (apt package prometheus)")
    rules = rendered_rules(tmp_path)
    shutil.copyfile(RULE_TESTS, tmp_path / RULE_TESTS.name)
    alerts = {rule["alert"] for group in yaml.safe_load(rules.read_text())["groups"] for rule in group["rules"]}
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))

    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    result = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name], cwd=tmp_path, capture_output=True, text=True, check=False
    )

    assert check.returncode == 0, check.stdout + check.stderr
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert (
        alerts
        == tested
        == {
            "PoimenHighErrorRatio",
            "PoimenHighHttpErrorRatio",
            "PoimenHighDegradedRatio",
            "PoimenSearchLatencyOverBudget",
            "PoimenLexicalOutboxLagging",
            "PoimenReadinessFlapping",
            "PoimenJwtKeyFileRefused",
        }
    )


@requires_helm
def test_alerts_use_only_metrics_the_service_exports(tmp_path: Path) -> None:
    suffixes = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
    exported = {
        family.name + suffix
        for family in REGISTRY.collect()
        if family.name.startswith("poimen_")
        for suffix in suffixes.get(family.type, ("",))
    }
    # Litestar's HTTP metrics exist once its middleware served a request (tests/api/test_dashboard_live.py).
    exported |= {
        name + suffix
        for name, kind in METRIC_CONTRACT.items()
        if name.startswith("poimen_http_")
        for suffix in (suffixes["histogram"] if kind == "histogram" else ("",))  # contract counters end in _total
    }
    rules = yaml.safe_load(rendered_rules(tmp_path).read_text())
    used = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"\bpoimen_\w+", rule["expr"])
    }

    assert used
    assert used <= exported
    assert "poimen_lexical_outbox_oldest_age_seconds" in used
    assert "poimen_http_requests_total" in used


# --- dependencies declared, locked, never committed -------------------------------------------------------


def test_chart_lock_pins_the_declared_dependencies() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    lock = yaml.safe_load((CHART / "Chart.lock").read_text())

    def declared(dependency: dict[str, Any]) -> dict[str, Any]:
        # helm's chart.Dependency JSON field order; empty fields are left out (omitempty).
        fields = ("name", "version", "repository", "condition", "tags", "enabled", "import-values", "alias")
        return {key: dependency[key] for key in fields if dependency.get(key) or key in {"name", "repository"}}

    digest = hashlib.sha256(
        json.dumps(
            [[declared(d) for d in chart["dependencies"]], [declared(d) for d in lock["dependencies"]]],
            separators=(",", ":"),
        ).encode()
    ).hexdigest()

    assert {(d["name"], d["version"], d["repository"], d["condition"]) for d in chart["dependencies"]} == {
        ("cluster", "0.8.1", "https://cloudnative-pg.github.io/charts", "postgresql.enabled"),
        ("opensearch", "3.6.0", "https://opensearch-project.github.io/helm-charts/", "opensearch.enabled"),
    }
    assert [(d["name"], d["version"], d["repository"]) for d in lock["dependencies"]] == [
        (d["name"], d["version"], d["repository"]) for d in chart["dependencies"]
    ]
    assert lock["digest"] == f"sha256:{digest}"  # what `helm dependency build` checks


def test_dependency_charts_are_never_committed() -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        [git, "ls-files", "charts/poimen-memory/charts"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    ignored = subprocess.run(
        [git, "check-ignore", "-q", "charts/poimen-memory/charts/opensearch-3.6.0.tgz"], cwd=ROOT, check=False
    )

    assert tracked == ""
    assert ignored.returncode == 0
