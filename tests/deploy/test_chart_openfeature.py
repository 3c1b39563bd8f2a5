"""The chart's OpenFeature path: a FeatureFlag with its FeatureFlagSource or InProcessConfiguration, rendered from
values, valid against the OpenFeature operator's CRD schemas (../shared/helm-deps), with the injection annotations."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from app.config import Settings
from app.domain.models import SearchStrategy
from app.engines.openfeature_flags import OpenFeatureKnobs
from app.engines.openfeature_provider import build_provider
from app.search.knob_source import FlagContext
from tests.deploy.conftest import HELM_DEPS
from tests.deploy.test_chart import HELM, INSTALL_HINT, Manifest, find, helm_fails, helm_template, main_container
from tests.deploy.test_chart_stack import unknown_fields

OPENFEATURE_CRDS = HELM_DEPS / "open-feature-operator-0.9.2-crds.yaml"
GROUP = "core.openfeature.dev"
IN_PROCESS = ("--set", "openfeature.mode=in-process", "--set", "openfeature.inProcess.host=flagd.flags")


def render(*args: str) -> list[Manifest]:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    return helm_template("--set", "openfeature.enabled=true", *args)


def openfeature_schema(kind: str) -> dict[str, Any]:
    if not OPENFEATURE_CRDS.exists():
        pytest.skip(f"{OPENFEATURE_CRDS} not found (../shared/helm-deps beside the repository, or HELM_DEPS_DIR)")
    for document in yaml.safe_load_all(OPENFEATURE_CRDS.read_text(encoding="utf-8")):
        if document and document["spec"]["group"] == GROUP and document["spec"]["names"]["kind"] == kind:
            for served in document["spec"]["versions"]:
                if served["name"] == "v1beta1":
                    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
                    return schema
    raise AssertionError(f"no {kind}.{GROUP}/v1beta1 in {OPENFEATURE_CRDS}")


def assert_valid(manifest: Manifest) -> None:
    import jsonschema  # noqa: PLC0415 - test-only dependency, as in test_chart_stack

    schema = openfeature_schema(manifest["kind"])
    jsonschema.Draft7Validator(schema).validate(manifest)
    assert unknown_fields(manifest["spec"], schema["properties"]["spec"], "spec") == []
    assert manifest["apiVersion"] == f"{GROUP}/v1beta1"


def pod_annotations(manifests: list[Manifest]) -> dict[str, str]:
    annotations: dict[str, str] = find(manifests, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    return annotations


def env_values(manifests: list[Manifest]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in main_container(manifests)["env"]}


@pytest.mark.parametrize("mode_args", [(), IN_PROCESS], ids=["sidecar", "in-process"])
def test_the_feature_flag_validates_against_the_operator_crd(mode_args: tuple[str, ...]) -> None:
    manifests = render(*mode_args)

    assert_valid(find(manifests, "FeatureFlag"))


def test_sidecar_mode_renders_a_valid_flag_source_and_the_injection_annotations() -> None:
    manifests = render()

    source = find(manifests, "FeatureFlagSource")
    assert_valid(source)
    flag = find(manifests, "FeatureFlag")
    # A ConfigMap the operator mounts: the pods have no service account token and no way to the API server.
    assert source["spec"]["sources"] == [{"source": f"search/{flag['metadata']['name']}", "provider": "file"}]
    assert find(manifests, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    annotations = pod_annotations(manifests)
    assert annotations["openfeature.dev/enabled"] == "true"
    assert annotations["openfeature.dev/featureflagsource"] == f"search/{source['metadata']['name']}"
    env = env_values(manifests)
    assert (env["FLAGS_PROVIDER"], env["FLAGD_RESOLVER"], env["FLAGD_PORT"]) == ("openfeature", "rpc", "8013")


def test_in_process_mode_renders_a_valid_in_process_configuration_and_its_annotation() -> None:
    manifests = render(*IN_PROCESS)

    configuration = find(manifests, "InProcessConfiguration")
    assert_valid(configuration)
    assert configuration["spec"]["host"] == "flagd.flags"
    assert pod_annotations(manifests)["openfeature.dev/inprocessconfiguration"] == (
        f"search/{configuration['metadata']['name']}"
    )
    # The operator injects FLAGD_RESOLVER/HOST/PORT from the InProcessConfiguration; the chart does not.
    assert "FLAGD_RESOLVER" not in env_values(manifests)
    assert [m for m in manifests if m["kind"] == "FeatureFlagSource"] == []


def test_disabled_by_default_leaves_the_flags_config_map_path_alone() -> None:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    manifests = helm_template()

    assert [m for m in manifests if m["apiVersion"].startswith(GROUP)] == []
    assert "FLAGS_PROVIDER" not in env_values(manifests)
    assert not any(key.startswith("openfeature.dev/") for key in pod_annotations(manifests))


LEXICAL_FUZZINESS_FLAG = (
    "--set-json",
    'openfeature.flags.lexical-fuzziness={"state": "ENABLED", "variants": {"on": true}, "defaultVariant": "on"}',
)


def test_a_knob_set_in_config_and_as_a_feature_flag_is_refused() -> None:
    # Both rendered: the flag won while the pods ran, and config.LEXICAL_FUZZINESS changed nothing.
    render()  # skips without helm

    refusal = helm_fails(
        "--set", "openfeature.enabled=true", *LEXICAL_FUZZINESS_FLAG, "--set", "config.LEXICAL_FUZZINESS=false"
    )

    assert "config.LEXICAL_FUZZINESS and openfeature.flags.lexical-fuzziness are one knob" in refusal
    assert "set it in openfeature.flags only" in refusal


def test_a_knob_only_in_the_unused_flags_file_may_be_set_in_config() -> None:
    # With OpenFeature the flags ConfigMap is unused: a knob in `flags` but no feature flag is the env's to set
    # (the chart refused config.RRF_K_CONSTANT, pointing at flags.rrf_k_constant, which the pods never read).
    manifests = render("--set", "config.RRF_K_CONSTANT=30")

    assert find(manifests, "ConfigMap", "-env")["data"]["RRF_K_CONSTANT"] == "30"


def test_the_default_feature_flag_is_a_flagd_file_the_service_reads(tmp_path: Any) -> None:
    flag = find(render(), "FeatureFlag")
    path = tmp_path / "flags.json"
    path.write_text(json.dumps({"flags": flag["spec"]["flagSpec"]["flags"]}))
    settings = Settings(_env_file=None, flags_provider="openfeature", flagd_offline_flag_source_path=path)
    source = OpenFeatureKnobs(settings, provider=build_provider(settings))

    resolved = source.resolve(FlagContext(targeting_key="sub:anyone", project="alpha"))
    source.close()

    assert resolved.knobs.search_strategy is SearchStrategy.HYBRID
    assert resolved.arm == "hybrid"
    assert source.problem() is None


def test_a_sidecar_that_watches_the_api_server_gets_the_servers_token_and_no_other_pod_does() -> None:
    manifests = render("--set", "openfeature.sidecar.syncProvider=kubernetes")

    source = find(manifests, "FeatureFlagSource")
    assert_valid(source)
    assert source["spec"]["sources"][0]["provider"] == "kubernetes"
    specs = {
        m["kind"]: m["spec"].get("template", {}).get("spec", m["spec"])
        for m in manifests
        if m["kind"] in {"Deployment", "Pod"}
    }
    assert specs["Deployment"]["automountServiceAccountToken"] is True
    assert specs["Pod"]["automountServiceAccountToken"] is False  # the helm test pod


def test_in_process_mode_opens_the_way_to_flagds_sync_port() -> None:
    manifests = render(*IN_PROCESS, "--set", "networkPolicy.enabled=true")

    policy = next(m for m in manifests if m["kind"] == "NetworkPolicy" and m["metadata"]["name"].endswith("memory"))
    egress_ports = {port["port"] for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert 8015 in egress_ports
