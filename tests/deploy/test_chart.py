"""The Helm chart, the plain manifests in k8s/ and the Dockerfile, checked with the real tools.

helm, kubernetes-validate, yamllint, hadolint and checkov come from scripts/install_k8s_tools.sh
(prefix $K8S_TOOLS_PREFIX, default ~/.cache/poimen-k8s-tools). Without helm every test here skips,
saying so; the rendered objects are then checked for what the service needs (probes, security,
flags hot reload, env the app accepts), beyond what the schema validators can see.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import Settings
from app.knobs import KNOB_ALIASES, KNOB_NAMES
from app.search.flags import knobs_from_settings, parse_flags_file
from app.wiring.vocabulary import build_query_optimizer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "poimen-memory"
PRODUCTION_VALUES = CHART / "ci" / "production-values.yaml"
DEFAULT_VALUES = CHART / "ci" / "default-values.yaml"
TOOLS_BIN = Path(os.environ.get("K8S_TOOLS_PREFIX", Path.home() / ".cache" / "poimen-k8s-tools")) / "bin"
INSTALL_HINT = "run scripts/install_k8s_tools.sh (helm, kubernetes-validate, yamllint, hadolint, checkov)"

Manifest = dict[str, Any]


def tool(name: str) -> str | None:
    candidate = TOOLS_BIN / name
    return str(candidate) if candidate.exists() else shutil.which(name)


HELM = tool("helm")
requires_helm = pytest.mark.skipif(HELM is None, reason=f"helm not installed: {INSTALL_HINT}")


def helm_template(*args: str, namespace: str = "search") -> list[Manifest]:
    assert HELM is not None
    result = subprocess.run(
        [HELM, "template", "poimen-memory", str(CHART), "--namespace", namespace, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def helm_fails(*args: str) -> str:
    """What `helm template` says when it refuses the chart with `args`; fails if it renders."""
    assert HELM is not None
    result = subprocess.run(
        [HELM, "template", "poimen-memory", str(CHART), "--namespace", "search", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode != 0, f"rendered although it should not: {args}"
    return result.stderr


def find(manifests: list[Manifest], kind: str, name_suffix: str = "") -> Manifest:
    matches = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"].endswith(name_suffix)]
    assert len(matches) == 1, f"{kind} *{name_suffix}: {[m['metadata']['name'] for m in matches]}"
    return matches[0]


def pod_specs(manifests: list[Manifest]) -> dict[str, Manifest]:
    """Every pod spec rendered (Deployment, Job, helm test Pod), by object name."""
    specs = {}
    for manifest in manifests:
        if manifest["kind"] in {"Deployment", "Job"}:
            specs[manifest["metadata"]["name"]] = manifest["spec"]["template"]["spec"]
        elif manifest["kind"] == "Pod":
            specs[manifest["metadata"]["name"]] = manifest["spec"]
    return specs


def main_container(manifests: list[Manifest]) -> Manifest:
    container: Manifest = find(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return container


@pytest.fixture(scope="module")
def default_render() -> list[Manifest]:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    return helm_template("--values", str(DEFAULT_VALUES), namespace="poimen")


@pytest.fixture(scope="module")
def production_render() -> list[Manifest]:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    return helm_template("--values", str(PRODUCTION_VALUES))


# --- the full tool chain ------------------------------------------------------------------------------


def test_check_deploy_script_passes(tmp_path: Path) -> None:
    missing = [
        name for name in ("helm", "kubernetes-validate", "yamllint", "hadolint", "checkov") if tool(name) is None
    ]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: {INSTALL_HINT}")

    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check_deploy.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )

    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "check_deploy: all checks passed" in result.stdout
    for render in ("default", "production", "quickstart", "production-stack"):
        summary = re.search(
            r"Passed checks: (\d+), Failed checks: (\d+)", (tmp_path / f"{render}.checkov.txt").read_text()
        )
        assert summary is not None
        assert int(summary.group(1)) > 100
        assert int(summary.group(2)) == 0


@requires_helm
def test_k8s_manifests_are_in_sync_with_the_chart() -> None:
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "render_k8s.sh"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_plain_manifests_hold_the_migrations_job_to_apply_first() -> None:
    manifests = [m for m in yaml.safe_load_all((ROOT / "k8s" / "prod" / "migrate-job.yaml").read_text()) if m]

    # Picked out of the render by their install hook: when the hooks moved to pre-install, it came out empty.
    assert sorted((m["kind"], m["metadata"]["name"]) for m in manifests) == [
        ("Job", "poimen-memory-migrate"),
        ("NetworkPolicy", "poimen-memory-aux"),
    ]


def refused_render(setting: str) -> str:
    """What `helm template` says when it refuses the chart with `--set setting`; fails if it renders."""
    return helm_fails("--set", setting)


@requires_helm
def test_schema_rejects_an_unknown_value() -> None:
    refusal = refused_render("flags.hybrid_rollout_pct=10")

    assert "hybrid_rollout_pct" in refusal


def test_the_schema_takes_every_setting_of_the_service_under_config_and_nothing_else() -> None:
    # A name the service does not read was taken and ignored (`config.RRF_FINAL_KK`); the list must follow
    # app/config.py, so adding a setting fails here until the schema names it.
    config = json.loads((CHART / "values.schema.json").read_text())["properties"]["config"]["propertyNames"]
    owned = set(config["not"]["enum"])  # secrets and the chart's own paths: refused by name

    assert set(config["enum"]) == {name.upper() for name in Settings.model_fields} - owned


@requires_helm
def test_a_misspelt_setting_is_refused_at_render() -> None:
    refusal = refused_render("config.RRF_FINAL_KK=3")

    assert "RRF_FINAL_KK" in refusal


@requires_helm
def test_a_knob_set_in_config_and_in_flags_is_refused() -> None:
    # The flags file overrides the environment while the pods run: config.RRF_K_CONSTANT would roll the
    # pods and change nothing.
    refusal = refused_render("config.RRF_K_CONSTANT=60")

    assert "config.RRF_K_CONSTANT and flags.rrf_k_constant are one knob" in refusal


@requires_helm
@pytest.mark.parametrize("setting", ["config.QUERY_OPTIMIZATION_ENABLED=false", "config.HYBRID_ROLLOUT_PERCENT=0"])
def test_a_knob_set_to_false_or_zero_in_config_and_in_flags_is_refused(setting: str) -> None:
    # `false` and 0 passed as unset (`default ""`), yet the ConfigMap rendered them and the flag overrode them.
    knob = setting.split(".", 1)[1].split("=", 1)[0]

    assert f"config.{knob} and flags.{knob.lower()} are one knob" in refused_render(setting)


@requires_helm
def test_a_knob_set_under_its_reference_name_and_ours_is_refused() -> None:
    # The pod exited at start ("FINAL_RESULT_K=20 and RRF_FINAL_K=10 disagree"), the chart's RRF_FINAL_K being 10.
    assert "set RRF_FINAL_K only" in refused_render("config.FINAL_RESULT_K=20")
    assert "config.RRF_FINAL_K and flags.final_result_k are one knob" in refused_render("flags.final_result_k=20")


def test_the_charts_knob_aliases_are_the_services() -> None:
    template = (CHART / "templates" / "configmap.yaml").read_text()
    aliases = dict(re.findall(r'"([A-Z_]+)" "([A-Z_]+)"', template.split("$aliases := dict", 1)[1].split("}}", 1)[0]))

    assert aliases == {alias.upper(): name.upper() for alias, name in KNOB_ALIASES.items()}


# --- what the rendered objects mean -----------------------------------------------------------------


def test_default_install_renders_the_expected_objects(default_render: list[Manifest]) -> None:
    kinds = sorted(m["kind"] for m in default_render)

    assert kinds == sorted(
        ["ServiceAccount", "Secret", "ConfigMap", "ConfigMap", "PersistentVolumeClaim", "Service", "Deployment", "Pod"]
    )
    deployment = find(default_render, "Deployment")
    assert deployment["spec"]["replicas"] == 1  # the embedded engines live in one pod
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # a ReadWriteOnce volume, one PostgreSQL


def test_production_install_scales_monitors_and_isolates(production_render: list[Manifest]) -> None:
    kinds = {m["kind"] for m in production_render}
    hpa = find(production_render, "HorizontalPodAutoscaler")

    assert {"HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget", "Job"} <= kinds
    assert "Secret" not in kinds  # credentials come from existingSecret
    assert "replicas" not in find(production_render, "Deployment")["spec"]  # the HPA owns the count
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["minReplicas"] == 3
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] >= 60
    assert find(production_render, "PodDisruptionBudget")["apiVersion"] == "policy/v1"
    # A crash-looping pod (an engine down at its start) would otherwise hold every node drain.
    assert find(production_render, "PodDisruptionBudget")["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_probes_use_the_split_endpoints(default_render: list[Manifest]) -> None:
    container = main_container(default_render)

    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    startup_budget_s = container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"]
    assert startup_budget_s >= 120  # model load on a cold node
    assert {port["containerPort"] for port in container["ports"]} == {8080}


@pytest.mark.parametrize("render", ["default_render", "production_render"])
def test_every_pod_runs_restricted(render: str, request: pytest.FixtureRequest) -> None:
    manifests: list[Manifest] = request.getfixturevalue(render)

    for name, spec in pod_specs(manifests).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        mounts_by_container = {}
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert context["runAsUser"] == 65532, name
            assert container["resources"]["limits"]["memory"], name
            mounts_by_container[container["name"]] = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert all("/tmp" in mounts for mounts in mounts_by_container.values()), name


def test_server_writes_only_to_tmp_and_data(default_render: list[Manifest]) -> None:
    deployment = find(default_render, "Deployment")["spec"]["template"]["spec"]
    container = deployment["containers"][0]
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    volumes = {volume["name"]: volume for volume in deployment["volumes"]}
    env = {item["name"]: item.get("value") for item in container["env"]}

    assert writable == {"/tmp", "/data"}
    assert "emptyDir" in volumes["tmp"]
    # The demo keeps its data across restarts: /data is the release's PersistentVolumeClaim.
    claim = find(default_render, "PersistentVolumeClaim")
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert env["POIMEN_DATA_DIR"] == "/data"


def test_flags_configmap_is_mounted_as_the_watched_file(production_render: list[Manifest]) -> None:
    container = main_container(production_render)
    env = {item["name"]: item.get("value") for item in container["env"]}
    flags_mount = next(m for m in container["volumeMounts"] if m["name"] == "flags")
    spec = find(production_render, "Deployment")["spec"]["template"]["spec"]
    flags_volume = next(v for v in spec["volumes"] if v["name"] == "flags")

    assert "subPath" not in flags_mount  # subPath mounts never see ConfigMap updates
    assert env["POIMEN_FLAGS_FILE"] == flags_mount["mountPath"] + "/flags.yaml"
    assert flags_volume["configMap"]["name"] == find(production_render, "ConfigMap", "-flags")["metadata"]["name"]


def test_rendered_flags_file_is_accepted_by_the_app(production_render: list[Manifest]) -> None:
    content = find(production_render, "ConfigMap", "-flags")["data"]["flags.yaml"]

    flags, file_keys = parse_flags_file(content.encode(), base=knobs_from_settings(Settings(_env_file=None)))

    assert flags.hybrid_rollout_percent == 0.0
    assert flags.rollout_shadow_enabled is True
    assert file_keys <= set(KNOB_NAMES)


@requires_helm
@pytest.mark.parametrize("blank", ["", "   ", "\u3000"], ids=["empty", "blank", "ideographic-space"])
def test_every_flag_blank_renders_and_sets_nothing_beside_its_config_value(tmp_path: Path, blank: str) -> None:
    # The app reads a blank flag as not set (`app/knobs.py` is_blank), but the schema refused one for every knob
    # but the routing list ("value must be one of", "got string, want integer"), and the template took a blank
    # flag beside its config value (values.yaml sets RRF_FINAL_K) for the same knob set twice.
    values = tmp_path / "blank-flags.yaml"
    values.write_text(
        yaml.safe_dump(
            {"flags": dict.fromkeys((*KNOB_NAMES, *KNOB_ALIASES), blank), "config": {"SEARCH_STRATEGY": "lexical"}}
        )
    )

    manifests = helm_template("-f", str(values))
    content = find(manifests, "ConfigMap", "-flags")["data"]["flags.yaml"]
    environment = find(manifests, "ConfigMap", "-env")["data"]
    base = knobs_from_settings(Settings(_env_file=None))

    assert parse_flags_file(content.encode(), base=base) == (base, frozenset())
    assert (environment["SEARCH_STRATEGY"], environment["RRF_FINAL_K"]) == ("lexical", "10")


@requires_helm
@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("flags.rrf_k_constant=seven", "got string, want integer"),
        ("flags.rrf_k_constant= 7", "got string, want integer"),
        ("flags.search_strategy=turbo", "value must be one of"),
        ("flags.query_optimization_enabled=yes", "got string, want boolean"),
    ],
)
def test_a_flag_that_is_neither_its_type_nor_blank_is_still_refused(setting: str, reason: str) -> None:
    knob = setting.removeprefix("flags.").split("=", 1)[0]

    refusal = helm_fails("--set-string", setting)

    assert f"at '/flags/{knob}'" in refusal
    assert reason in refusal


@requires_helm
def test_a_query_vocabulary_is_mounted_where_the_app_reads_it_and_accepted_by_it(tmp_path: Path) -> None:
    manifests = helm_template(
        "--set", "queryVocabulary.abbreviations.pmx=poimen memory index",
        "--set", "queryVocabulary.entities={blue harbor,Poimen}",
        "--set", "queryVocabulary.mode=replace",
    )  # fmt: skip
    container = main_container(manifests)
    env = {item["name"]: item.get("value") for item in container["env"]}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "vocabulary")
    content = find(manifests, "ConfigMap", "-vocabulary")["data"]["vocabulary.json"]
    (tmp_path / "vocabulary.json").write_text(content, encoding="utf-8")

    optimizer = build_query_optimizer(
        Settings(_env_file=None, query_vocabulary_path=tmp_path / "vocabulary.json", query_vocabulary_mode="replace")
    )

    assert env["QUERY_VOCABULARY_PATH"] == mount["mountPath"] + "/vocabulary.json"
    assert env["QUERY_VOCABULARY_MODE"] == "replace"
    assert "checksum/vocabulary" in find(manifests, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert optimizer.analyze("pmx k8s at blue harbor").entities.expansions == {"pmx": "poimen memory index"}


@requires_helm
def test_no_query_vocabulary_renders_no_file_and_no_setting() -> None:
    manifests = helm_template()

    env = {item["name"] for item in main_container(manifests)["env"]}

    assert not {"QUERY_VOCABULARY_PATH", "QUERY_VOCABULARY_MODE"} & env
    assert not [m for m in manifests if m["metadata"]["name"].endswith("-vocabulary")]


@requires_helm
def test_changing_a_flag_does_not_restart_pods_but_changing_env_does() -> None:
    def render(*sets: str) -> list[Manifest]:
        return helm_template("--values", str(PRODUCTION_VALUES), *[arg for s in sets for arg in ("--set", s)])

    base = render("flags.hybrid_rollout_percent=10")
    flag_step = render("flags.hybrid_rollout_percent=50")
    env_change = render("flags.hybrid_rollout_percent=10", "config.LOG_LEVEL=DEBUG")

    def template(manifests: list[Manifest]) -> Manifest:
        pod_template: Manifest = find(manifests, "Deployment")["spec"]["template"]
        return pod_template

    assert template(flag_step) == template(base)
    assert find(flag_step, "ConfigMap", "-flags") != find(base, "ConfigMap", "-flags")
    annotations = template(env_change)["metadata"]["annotations"]
    assert annotations["checksum/config"] != template(base)["metadata"]["annotations"]["checksum/config"]


@pytest.mark.parametrize("render", ["default_render", "production_render"])
def test_rendered_env_is_a_valid_app_configuration(
    render: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests: list[Manifest] = request.getfixturevalue(render)
    config = find(manifests, "ConfigMap", "-env")["data"]
    container = main_container(manifests)
    field_env_names = {name.upper() for name in Settings.model_fields}
    for name in list(os.environ):
        if name.upper() in field_env_names:
            monkeypatch.delenv(name)

    for name, value in config.items():
        monkeypatch.setenv(name, value)
    for item in container["env"]:
        if "value" in item:
            monkeypatch.setenv(item["name"], item["value"])
        elif item["name"] in {"JWT_SECRET", "OPENSEARCH_USERNAME", "OPENSEARCH_PASSWORD"}:
            monkeypatch.setenv(item["name"], "x" * 48)  # stands in for the Secret's key
    if any(item["name"] == "JWT_PUBLIC_KEY_FILE" for item in container["env"]):
        monkeypatch.setenv("JWT_PUBLIC_KEY_FILE", "/etc/poimen/jwt/JWT_PUBLIC_KEY")
    settings = Settings(_env_file=None)

    assert set(config) <= field_env_names  # no env name the app would silently ignore
    assert {item["name"] for item in container["env"]} <= field_env_names
    assert settings.auth_mode == "jwt"
    assert str(settings.poimen_data_dir) == "/data"


def test_production_reads_every_credential_from_the_existing_secret(production_render: list[Manifest]) -> None:
    container = main_container(production_render)
    refs = {
        item["name"]: item["valueFrom"]["secretKeyRef"]
        for item in container["env"]
        if "secretKeyRef" in item.get("valueFrom", {})
    }
    job = find(production_render, "Job")["spec"]["template"]["spec"]["containers"][0]
    job_refs = {item["name"]: item["valueFrom"]["secretKeyRef"] for item in job["env"] if "valueFrom" in item}

    assert {ref["name"] for ref in refs.values()} == {"poimen-memory-credentials"}
    assert refs["DATABASE_URL"]["optional"] is False
    # Two roles: the Job migrates as the owner (its own Secret) and grants the service's runtime role.
    assert job_refs["DATABASE_URL"] == {"name": "poimen-memory-db-owner", "key": "DATABASE_URL"}
    assert {"name": "DATABASE_RUNTIME_ROLE", "value": "poimen_runtime"} in job["env"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["JWT_PUBLIC_KEY_FILE"] == "/etc/poimen/jwt/JWT_PUBLIC_KEY"
    assert env["OPENSEARCH_CA_FILE"] == "/etc/poimen/opensearch-ca/ca.crt"


def test_migrations_job_on_an_own_database_runs_before_install_and_before_upgrade(
    production_render: list[Manifest],
) -> None:
    job = find(production_render, "Job")
    annotations = job["metadata"]["annotations"]
    spec = job["spec"]["template"]["spec"]
    wait = spec["initContainers"][0]

    # Before install: the database exists and may hold an older schema, which the pods refuse (after them,
    # with --wait, the Job would never run). Before upgrade: a failed migration fails the upgrade while the
    # old pods serve. With the bundled Cluster it runs after install (tests/deploy/test_chart_stack.py).
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert spec["containers"][0]["args"] == ["poimen", "migrate"]
    assert spec["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] >= 3  # a database still starting is retried, not fatal
    assert wait["name"] == "wait-for-backends"
    assert "DATABASE_URL" in {item["name"] for item in wait["env"]}


def test_helm_test_pod_queries_readyz_through_the_service(default_render: list[Manifest]) -> None:
    pod = find(default_render, "Pod")
    service = find(default_render, "Service")
    script = pod["spec"]["containers"][0]["command"][-1]

    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert f"http://{service['metadata']['name']}.poimen.svc:8080/readyz" in script


def test_servicemonitor_scrapes_the_service_port(production_render: list[Manifest]) -> None:
    monitor = find(production_render, "ServiceMonitor")
    service = find(production_render, "Service")
    endpoint = monitor["spec"]["endpoints"][0]

    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def network_policies(manifests: list[Manifest]) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m["spec"] for m in manifests if m["kind"] == "NetworkPolicy"}


def test_the_otlp_endpoint_is_the_otlp_http_port_the_networkpolicy_opens(production_render: list[Manifest]) -> None:
    config = find(production_render, "ConfigMap", "-env")["data"]
    policy = network_policies(production_render)["poimen-memory"]
    egress_ports = {port["port"] for rule in policy["egress"] for port in rule["ports"]}

    # The exporter is OTLP/HTTP (app/observability/tracing.py): gRPC's 4317 lost every span.
    assert config["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(":4318")
    assert 4318 in egress_ports


def test_networkpolicy_opens_only_the_needed_ports(production_render: list[Manifest]) -> None:
    policy = network_policies(production_render)["poimen-memory"]
    egress_ports = {(port["port"], port["protocol"]) for rule in policy["egress"] for port in rule["ports"]}
    ingress_ports = {port["port"] for rule in policy["ingress"] for port in rule["ports"]}

    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert egress_ports == {(53, "UDP"), (53, "TCP"), (5432, "TCP"), (9200, "TCP"), (4318, "TCP")}
    assert ingress_ports == {"http"}
    assert (
        policy["podSelector"]["matchLabels"] == find(production_render, "Deployment")["spec"]["selector"]["matchLabels"]
    )


def test_pods_spread_over_zones_and_nodes(production_render: list[Manifest]) -> None:
    deployment = find(production_render, "Deployment")
    constraints = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]

    assert {c["topologyKey"] for c in constraints} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    assert all(c["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"] for c in constraints)


@requires_helm
def test_an_anti_affinity_term_without_label_selector_gets_the_release_pod_selector() -> None:
    own = {"matchLabels": {"team": "search"}}
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname"},
                {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": own},
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}},
            ],
        }
    }
    deployment = find(
        helm_template("--values", str(PRODUCTION_VALUES), "--set-json", f"affinity={json.dumps(affinity)}"),
        "Deployment",
    )
    selector = {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}
    rendered = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]

    required = rendered["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [term["labelSelector"] for term in required] == [selector, own]
    preferred = rendered["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [term["podAffinityTerm"]["labelSelector"] for term in preferred] == [selector]


@requires_helm
def test_no_disruption_budget_for_a_single_replica() -> None:
    kinds = {
        m["kind"]
        for m in helm_template(
            "--values", str(PRODUCTION_VALUES), "--set", "autoscaling.enabled=false", "--set", "replicaCount=1"
        )
    }

    assert "PodDisruptionBudget" not in kinds


def test_dockerfile_matches_the_chart(default_render: list[Manifest]) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    container = main_container(default_render)

    assert 'CMD ["poimen", "serve", "--host", "0.0.0.0", "--port", "8080"]' in dockerfile
    assert container["args"] == ["poimen", "serve", "--host", "0.0.0.0", "--port", "8080"]
    assert "USER 65532:65532" in dockerfile
    assert 'ENTRYPOINT ["/usr/bin/tini", "--"]' in dockerfile
    assert "/healthz" in dockerfile
    assert "HF_HUB_OFFLINE=1" in dockerfile
    assert "POIMEN_MIGRATIONS_DIR=/app/migrations" in dockerfile


def test_short_lived_pods_have_their_own_networkpolicy_before_install(production_render: list[Manifest]) -> None:
    aux = next(m for m in production_render if m["metadata"]["name"] == "poimen-memory-aux")
    selector = aux["spec"]["podSelector"]["matchLabels"]
    job_labels = find(production_render, "Job")["spec"]["template"]["metadata"]["labels"]
    test_labels = find(production_render, "Pod")["metadata"]["labels"]
    server_labels = find(production_render, "Deployment")["spec"]["template"]["metadata"]["labels"]
    egress_ports = {port["port"] for rule in aux["spec"]["egress"] for port in rule["ports"]}

    assert aux["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"  # with the Job
    assert selector.items() <= job_labels.items()
    assert selector.items() <= test_labels.items()
    assert not selector.items() <= server_labels.items()
    assert "ingress" not in aux["spec"]
    assert egress_ports == {53, 5432, 8080}


def test_service_selects_only_server_pods(production_render: list[Manifest]) -> None:
    selector = find(production_render, "Service")["spec"]["selector"]
    job_labels = find(production_render, "Job")["spec"]["template"]["metadata"]["labels"]
    test_labels = find(production_render, "Pod")["metadata"]["labels"]
    server_labels = find(production_render, "Deployment")["spec"]["template"]["metadata"]["labels"]

    assert selector.items() <= server_labels.items()
    assert not selector.items() <= job_labels.items()
    assert not selector.items() <= test_labels.items()


@requires_helm
def test_dev_manifests_need_only_a_jwt_secret() -> None:
    manifests = helm_template("--values", str(ROOT / "k8s" / "values-dev.yaml"), "--no-hooks", namespace="poimen-dev")
    container = main_container(manifests)
    required_keys = {
        item["valueFrom"]["secretKeyRef"]["key"]
        for item in container["env"]
        if "secretKeyRef" in item.get("valueFrom", {}) and not item["valueFrom"]["secretKeyRef"].get("optional")
    }

    assert required_keys == {"JWT_SECRET"}
    assert "DATABASE_URL" not in {item["name"] for item in container["env"]}
    assert "Job" not in {m["kind"] for m in manifests}


STYLE_VALUES_ORDER = [
    "image", "replicaCount", "autoscaling", "podDisruptionBudget", "service", "ingress", "resources",
    "startupProbe", "livenessProbe", "readinessProbe", "metrics", "config", "existingSecret",
    "podSecurityContext", "containerSecurityContext", "nodeSelector", "tolerations", "affinity",
    "topologySpreadConstraints",
]  # fmt: skip


def test_values_follow_the_house_order_and_every_key_is_commented() -> None:
    lines = (CHART / "values.yaml").read_text(encoding="utf-8").splitlines()
    top_level = [(index, line.split(":", 1)[0]) for index, line in enumerate(lines) if re.match(r"^[A-Za-z]\w*:", line)]
    keys = [key for _, key in top_level]
    uncommented = [key for index, key in top_level if not lines[index - 1].startswith("#")]

    assert [key for key in keys if key in STYLE_VALUES_ORDER] == STYLE_VALUES_ORDER
    assert keys.index("topologySpreadConstraints") > keys.index("existingSecret")
    assert uncommented == []
    assert set(keys) == set(yaml.safe_load((CHART / "values.schema.json").read_text())["properties"]) - {"global"}


@requires_helm
def test_a_pod_serves_on_until_proxies_forget_it_and_drains_within_its_grace_period(
    default_render: list[Manifest],
) -> None:
    # uvicorn closes its port at SIGTERM, while kube-proxy and ingresses still send it new connections;
    # the drain (20 s of requests, 10 s of outbox, the trace flush) could outlast the old 30 s grace.
    pod = find(default_render, "Deployment")["spec"]["template"]["spec"]
    command = main_container(default_render)["lifecycle"]["preStop"]["exec"]["command"]

    assert command == ["sleep", "10"]
    assert pod["terminationGracePeriodSeconds"] >= 10 + 20 + 10 + 5
    assert "lifecycle" not in main_container(helm_template("--set", "preStopSleepSeconds=0"))


@requires_helm
def test_the_default_ingress_publishes_the_api_paths_only() -> None:
    ingress = find(helm_template("--set", "ingress.enabled=true"), "Ingress")
    paths = {(path["path"], path["pathType"]) for rule in ingress["spec"]["rules"] for path in rule["http"]["paths"]}

    assert paths == {("/v1", "Prefix"), ("/memory/query", "Exact")}  # not /metrics, /readyz, /schema, /console


@requires_helm
def test_networkpolicy_opens_the_bundled_opensearchs_own_port() -> None:
    stack = helm_template(
        "--values", str(CHART / "ci" / "production-stack-values.yaml"), "--set", "opensearch.httpPort=9201"
    )
    egress_ports = {
        port["port"] for rule in network_policies(stack)["poimen-memory"]["egress"] for port in rule["ports"]
    }
    url = next(item["value"] for item in main_container(stack)["env"] if item["name"] == "OPENSEARCH_URL")

    assert url.endswith(":9201")
    assert 9201 in egress_ports
    assert 9200 not in egress_ports


@requires_helm
def test_a_key_file_the_chart_managed_secret_does_not_hold_is_refused_at_render() -> None:
    # The pod mounted a Secret key that did not exist and stayed in ContainerCreating for ever.
    assert "set secret.jwtPublicKey" in helm_fails("--set", "jwtKeyFile=publicKey")
    assert "set secret.jwks" in helm_fails("--set", "jwtKeyFile=jwks")
    helm_template("--set", "jwtKeyFile=jwks", "--set-string", "secret.jwks=a-jwks-document")  # present: renders


@requires_helm
def test_a_cluster_in_another_namespace_than_the_release_is_refused_at_render() -> None:
    # secretKeyRef reaches only the pod's own namespace: the server and the Job could not start.
    stack = str(CHART / "ci" / "production-stack-values.yaml")

    assert "postgresql.namespaceOverride=databases" in helm_fails(
        "--values", stack, "--set", "postgresql.namespaceOverride=databases"
    )


# --- files and env of the operator's own: extraVolumes, extraVolumeMounts, migrations.extra* --------------------------


def docs_example(marker: str) -> Manifest:
    """The values of the ```yaml block of docs/deploy.md that mentions `marker`: what a reader copies."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8"), re.DOTALL)
    matches = [block for block in blocks if marker in block]
    assert len(matches) == 1, marker
    values: Manifest = yaml.safe_load(matches[0])
    return values


def values_file(tmp_path: Path, values: Manifest) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return str(path)


def mounted_file(spec: Manifest, container: Manifest, path: str) -> tuple[Manifest, str]:
    """The volume that holds `path` in `container` of the pod `spec`, and the path inside that volume."""
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/"))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    return volume, path.removeprefix(mount["mountPath"].rstrip("/") + "/")


def without_env_and_volumes(spec: Manifest) -> Manifest:
    """A pod spec less its volumes and its first container's env and mounts: what the extra values leave alone."""
    first, *others = spec["containers"]
    rest = {key: value for key, value in first.items() if key not in {"env", "volumeMounts"}}
    return {**{key: value for key, value in spec.items() if key != "volumes"}, "containers": [rest, *others]}


@requires_helm
def test_a_reranker_model_folder_is_mounted_in_the_server_pod_after_the_charts_volumes(tmp_path: Path) -> None:
    # RERANKER=cross-encoder needs RERANKER_MODEL_PATH, a folder: the chart had no way to mount one.
    example = docs_example("RERANKER_MODEL_PATH")
    default = helm_template()

    manifests = helm_template("--values", values_file(tmp_path, example))

    spec = find(manifests, "Deployment")["spec"]["template"]["spec"]
    container = main_container(manifests)
    default_volumes = find(default, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert spec["volumes"] == default_volumes + example["extraVolumes"]
    assert container["volumeMounts"] == main_container(default)["volumeMounts"] + example["extraVolumeMounts"]
    model_path = find(manifests, "ConfigMap", "-env")["data"]["RERANKER_MODEL_PATH"]
    assert any(m["mountPath"] == model_path and m["readOnly"] for m in container["volumeMounts"])


@requires_helm
def test_postgresql_tls_verification_reaches_the_server_and_the_migrations_job(tmp_path: Path) -> None:
    # asyncpg reads PGSSLMODE and PGSSLROOTCERT from the environment; the Job had neither env nor volumes,
    # so its connection could never be verified.
    stack = str(CHART / "ci" / "production-stack-values.yaml")

    manifests = helm_template("--values", stack, "--values", values_file(tmp_path, docs_example("PGSSLROOTCERT")))

    deployment = find(manifests, "Deployment", "poimen-memory")["spec"]["template"]["spec"]
    job = find(manifests, "Job", "-migrate")["spec"]["template"]["spec"]
    ca_secret = f"{find(manifests, 'Cluster')['metadata']['name']}-ca"  # CloudNativePG's CA of that Cluster
    for spec in (deployment, job):
        container = spec["containers"][0]
        env = {item["name"]: item.get("value") for item in container["env"]}
        volume, key = mounted_file(spec, container, env["PGSSLROOTCERT"])
        assert env["PGSSLMODE"] == "verify-full"
        assert volume["secret"] == {"secretName": ca_secret, "items": [{"key": "ca.crt", "path": "ca.crt"}]}
        assert key == "ca.crt"  # only the certificate: the Secret also holds the CA's private key


@requires_helm
def test_the_migrations_job_gets_its_own_env_and_volumes_and_keeps_its_restrictions(tmp_path: Path) -> None:
    extras = {
        "extraEnv": [{"name": "RERANKER_MODEL_PATH", "value": "/models/reranker"}],
        "extraVolumes": [{"name": "reranker-model", "persistentVolumeClaim": {"claimName": "reranker-model"}}],
        "extraVolumeMounts": [{"name": "reranker-model", "mountPath": "/models/reranker"}],
        "migrations": {
            "extraEnv": [{"name": "PGSSLMODE", "value": "verify-full"}],
            "extraVolumes": [{"name": "postgresql-ca", "secret": {"secretName": "postgresql-ca"}}],
            "extraVolumeMounts": [{"name": "postgresql-ca", "mountPath": "/etc/postgresql-ca", "readOnly": True}],
        },
    }
    before = find(helm_template("--values", str(PRODUCTION_VALUES)), "Job")["spec"]["template"]["spec"]

    manifests = helm_template("--values", str(PRODUCTION_VALUES), "--values", values_file(tmp_path, extras))

    after = find(manifests, "Job")["spec"]["template"]["spec"]
    container, old_container = after["containers"][0], before["containers"][0]
    assert container["env"] == old_container["env"] + extras["migrations"]["extraEnv"]
    assert container["volumeMounts"] == old_container["volumeMounts"] + extras["migrations"]["extraVolumeMounts"]
    assert after["volumes"] == before["volumes"] + extras["migrations"]["extraVolumes"]
    # Nothing else changed: no token, restricted contexts, the wait container; and none of the server's extras
    # (RERANKER_MODEL_PATH without RERANKER, which the Job never gets, stops `poimen migrate` at start).
    assert without_env_and_volumes(after) == without_env_and_volumes(before)
    assert after["automountServiceAccountToken"] is False
    server = main_container(manifests)
    assert "PGSSLMODE" not in {item["name"] for item in server["env"]}
    assert "postgresql-ca" not in {mount["name"] for mount in server["volumeMounts"]}


@requires_helm
@pytest.mark.parametrize("key", ["", "migrations."])
@pytest.mark.parametrize("name", ["tmp", "data", "flags", "jwt-key"])
def test_a_volume_named_as_one_of_the_charts_is_refused_at_render(key: str, name: str) -> None:
    refusal = helm_fails(
        "--set", f"{key}extraVolumes[0].name={name}", "--set", f"{key}extraVolumes[0].emptyDir.medium=Memory"
    )  # fmt: skip

    assert f'{key}extraVolumes: the volume name "{name}" is the chart\'s own' in refusal


@requires_helm
@pytest.mark.parametrize("key", ["", "migrations."])
@pytest.mark.parametrize("path", ["/tmp", "/data/", "/etc/poimen/flags", "/etc/poimen/models", "/etc"])
def test_a_mount_path_the_chart_uses_is_refused_at_render(key: str, path: str) -> None:
    refusal = helm_fails(
        "--set", f"{key}extraVolumes[0].name=models", "--set", f"{key}extraVolumes[0].emptyDir.medium=Memory",
        "--set", f"{key}extraVolumeMounts[0].name=models", "--set", f"{key}extraVolumeMounts[0].mountPath={path}",
    )  # fmt: skip

    assert f"{key}extraVolumeMounts: the mount path {path} collides with the chart's mounts" in refusal


@requires_helm
def test_a_mount_inside_the_writable_data_folder_renders() -> None:
    manifests = helm_template(
        "--set", "extraVolumes[0].name=models", "--set", "extraVolumes[0].emptyDir.medium=Memory",
        "--set", "extraVolumeMounts[0].name=models", "--set", "extraVolumeMounts[0].mountPath=/data/models",
    )  # fmt: skip

    assert main_container(manifests)["volumeMounts"][-1] == {"name": "models", "mountPath": "/data/models"}


@requires_helm
def test_a_job_mount_of_a_volume_only_the_server_has_is_refused_at_render() -> None:
    # The two pods list their volumes apart: the Job's mount would name a volume its pod does not have.
    refusal = helm_fails(
        "--set", "extraVolumes[0].name=postgresql-ca", "--set", "extraVolumes[0].secret.secretName=postgresql-ca",
        "--set", "migrations.extraVolumeMounts[0].name=postgresql-ca",
        "--set", "migrations.extraVolumeMounts[0].mountPath=/etc/postgresql-ca",
    )  # fmt: skip

    assert 'mounts the volume "postgresql-ca", which migrations.extraVolumes does not hold' in refusal


@requires_helm
def test_a_misspelt_volume_mount_field_is_refused_by_the_schema() -> None:
    refusal = helm_fails(
        "--set", "migrations.extraVolumes[0].name=models", "--set", "migrations.extraVolumes[0].emptyDir.medium=Memory",
        "--set", "migrations.extraVolumeMounts[0].name=models", "--set", "migrations.extraVolumeMounts[0].mountpath=/m",
    )  # fmt: skip

    assert "mountpath" in refusal


def test_opensearch_values_take_only_the_opensearch_charts_own_names() -> None:
    # That chart has no schema of its own: a misspelt name under `opensearch:` (say `enableInitChown`, which
    # belongs under `persistence:`) was ignored, and the setting it meant silently not applied.
    packaged = next((CHART / "charts").glob("opensearch-*.tgz"))
    with tarfile.open(packaged) as archive:
        member = archive.extractfile("opensearch/values.yaml")
        assert member is not None
        names = set(yaml.safe_load(member.read()))
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["opensearch"]

    assert schema["propertyNames"]["enum"] == sorted(names | {"enabled"})


@requires_helm
def test_a_misspelt_opensearch_value_is_refused_naming_it() -> None:
    stderr = helm_fails("--set", "opensearch.enabled=true", "--set", "opensearch.enableInitChown=false")

    assert "invalid propertyName 'enableInitChown'" in stderr


OPENSEARCH_LEVELS_WE_SET = [("persistence",), ("securityConfig",), ("securityConfig", "config")]
"""The maps under `opensearch:` whose names values.yaml, values-quickstart.yaml and ci/*.yaml set (not the others)."""


@pytest.mark.parametrize("level", OPENSEARCH_LEVELS_WE_SET, ids=".".join)
def test_opensearch_values_take_only_that_charts_own_names_at_the_levels_we_set(level: tuple[str, ...]) -> None:
    # One level down, a misspelt name (`persistence.storageClas`, `securityConfig.config.dataComplet`) was ignored
    # too. The names are those its values.yaml holds or its templates read (`storageClass` is only read there).
    packaged = next((CHART / "charts").glob("opensearch-*.tgz"))
    with tarfile.open(packaged) as archive:
        member = archive.extractfile("opensearch/values.yaml")
        assert member is not None
        declared = yaml.safe_load(member.read())
        templates = ""
        for item in archive.getmembers():
            template = archive.extractfile(item) if item.name.startswith("opensearch/templates/") else None
            templates += template.read().decode() if template is not None else ""
    for name in level:
        declared = declared[name]
    read = re.findall(r"\.Values\." + re.escape(".".join(level)) + r"\.([A-Za-z]+)", templates)
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["opensearch"]
    for name in level:
        schema = schema["properties"][name]

    assert schema["propertyNames"]["enum"] == sorted(set(declared) | set(read))


@requires_helm
@pytest.mark.parametrize(
    ("setting", "misspelt"),
    [("opensearch.persistence.storageClas=fast", "storageClas"), ("opensearch.securityConfig.rolesSecrets=r", "rolesSecrets"),
     ("opensearch.securityConfig.config.dataComplet=false", "dataComplet")],
    ids=["persistence", "securityConfig", "securityConfig.config"],
)  # fmt: skip
def test_a_misspelt_opensearch_value_one_level_down_is_refused_naming_it(setting: str, misspelt: str) -> None:
    stderr = helm_fails("--set", "opensearch.enabled=true", "--set", setting)

    assert f"invalid propertyName '{misspelt}'" in stderr
