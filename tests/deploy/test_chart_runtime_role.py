"""Two PostgreSQL roles in the chart: the service as a runtime role, the migrations Job as the tables' owner.

With CloudNativePG the runtime role is a managed role of the `Cluster` (its password in a basic-auth Secret);
the Job reads the owner's `<cluster>-app` Secret and grants the runtime role (DATABASE_RUNTIME_ROLE, which
tests/contract/test_runtime_role_grants.py runs on a real PostgreSQL). With an external database the operator
gives two URLs, or one (today's behaviour, the weaker guarantee, which NOTES says).
"""

from __future__ import annotations

import base64
import os
import subprocess
from typing import TYPE_CHECKING

import pytest
import yaml

from app.config import Settings
from tests.deploy.test_chart import (
    CHART,
    HELM,
    INSTALL_HINT,
    Manifest,
    find,
    helm_fails,
    helm_template,
    main_container,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

pytestmark = pytest.mark.slow

QUICKSTART = ("--values", str(CHART / "values-quickstart.yaml"))
EXTERNAL = ("--set", "config.OPENSEARCH_URL=https://opensearch.search.svc:9200")
RUNTIME_URL = "postgresql://poimen_runtime:r@db.databases.svc:5432/poimen"
OWNER_URL = "postgresql://poimen:o@db.databases.svc:5432/poimen"


@pytest.fixture(autouse=True)
def needs_helm() -> None:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")


@pytest.fixture(scope="module")
def quickstart() -> list[Manifest]:
    if HELM is None:
        pytest.skip(f"helm not installed: {INSTALL_HINT}")
    return helm_template(*QUICKSTART)


def env_of(container: Manifest) -> dict[str, Manifest]:
    return {item["name"]: item for item in container.get("env", [])}


def job_containers(manifests: list[Manifest]) -> list[Manifest]:
    spec = find(manifests, "Job", "-migrate")["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def secret_value(manifests: list[Manifest], name: str, key: str) -> str:
    secret = next(m for m in manifests if m["kind"] == "Secret" and m["metadata"]["name"] == name)
    return base64.b64decode(secret["data"][key]).decode()


def notes(*args: str) -> str:
    assert HELM is not None
    result = subprocess.run(
        [HELM, "install", "poimen-memory", str(CHART), "--namespace", "search", "--dry-run=client", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]


# --- CloudNativePG -------------------------------------------------------------------------------------


def test_the_cluster_manages_a_runtime_role_that_is_no_superuser(quickstart: list[Manifest]) -> None:
    roles = find(quickstart, "Cluster")["spec"]["managed"]["roles"]
    secret = next(
        m for m in quickstart if m["kind"] == "Secret" and m["metadata"]["name"] == "poimen-memory-db-runtime"
    )

    assert len(roles) == 1
    assert roles[0] | {"comment": None} == {
        "name": "poimen_runtime",
        "ensure": "present",
        "comment": None,
        "login": True,
        "superuser": False,
        "bypassrls": False,
        "createdb": False,
        "createrole": False,
        "replication": False,
        "inherit": False,
        "connectionLimit": -1,
        "passwordSecret": {"name": "poimen-memory-db-runtime"},
    }
    # CloudNativePG's passwordSecret format: basic-auth, username = the role; re-read when it changes.
    assert secret["type"] == "kubernetes.io/basic-auth"
    assert secret["metadata"]["namespace"] == "search"
    assert secret["metadata"]["labels"]["cnpg.io/reload"] == "true"
    assert secret_value(quickstart, "poimen-memory-db-runtime", "username") == "poimen_runtime"
    password = secret_value(quickstart, "poimen-memory-db-runtime", "password")
    assert len(password) == 40
    assert password.isalnum()  # goes into DATABASE_URL without escaping


def test_the_service_connects_as_the_runtime_role(quickstart: list[Manifest]) -> None:
    cluster_name = find(quickstart, "Cluster")["metadata"]["name"]
    container = main_container(quickstart)
    names = [item["name"] for item in container["env"]]
    env = env_of(container)

    assert env["POIMEN_DATABASE_RUNTIME_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "poimen-memory-db-runtime",
        "key": "password",
    }
    assert env["DATABASE_URL"]["value"] == (
        f"postgresql://poimen_runtime:$(POIMEN_DATABASE_RUNTIME_PASSWORD)@{cluster_name}-rw.search.svc:5432/app"
    )
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    assert names.index("POIMEN_DATABASE_RUNTIME_PASSWORD") < names.index("DATABASE_URL")
    assert "DATABASE_RUNTIME_ROLE" not in env
    assert f"{cluster_name}-app" not in yaml.safe_dump(find(quickstart, "Deployment"))  # the owner's Secret


def test_the_migrations_job_connects_as_the_owner_and_grants_the_runtime_role(quickstart: list[Manifest]) -> None:
    cluster = find(quickstart, "Cluster")
    containers = job_containers(quickstart)

    assert [env_of(c)["DATABASE_URL"]["valueFrom"]["secretKeyRef"] for c in containers] == [
        {"name": f"{cluster['metadata']['name']}-app", "key": "uri"}
    ] * 2  # the wait container and `poimen migrate`
    assert cluster["spec"]["bootstrap"]["initdb"]["owner"] == "app"  # whose URL `<cluster>-app` holds
    assert env_of(containers[-1])["DATABASE_RUNTIME_ROLE"] == {
        "name": "DATABASE_RUNTIME_ROLE",
        "value": "poimen_runtime",
    }


def test_the_job_env_is_accepted_by_poimen_migrate(quickstart: list[Manifest], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower() in Settings.model_fields:
            monkeypatch.delenv(name)
    for item in job_containers(quickstart)[-1]["env"]:
        monkeypatch.setenv(item["name"], item.get("value", "postgresql://app:x@db-rw.search:5432/app"))

    settings = Settings(_env_file=None)  # type: ignore[call-arg]

    assert settings.database_runtime_role == "poimen_runtime"


def test_another_role_name_renders_when_the_cluster_names_it_too() -> None:
    manifests = helm_template(
        *QUICKSTART,
        "--set", "databaseRuntimeRole.name=search_svc",
        "--set", "postgresql.cluster.roles[0].name=search_svc",
        "--set", "postgresql.cluster.roles[0].login=true",
        "--set", "postgresql.cluster.roles[0].passwordSecret.name=poimen-memory-db-runtime",
    )  # fmt: skip

    assert env_of(main_container(manifests))["DATABASE_URL"]["value"].startswith("postgresql://search_svc:")
    assert env_of(job_containers(manifests)[-1])["DATABASE_RUNTIME_ROLE"]["value"] == "search_svc"
    assert secret_value(manifests, "poimen-memory-db-runtime", "username") == "search_svc"


BROKEN_ROLE = {
    "a name the Cluster lacks": ["--set", "databaseRuntimeRole.name=other"],
    "a superuser": ["--set", "postgresql.cluster.roles[0].superuser=true"],
    "another password Secret": ["--set", "databaseRuntimeRole.secretName=elsewhere"],
    "no roles": ["--set", "postgresql.cluster.roles=null"],
}


@pytest.mark.parametrize("args", BROKEN_ROLE.values(), ids=BROKEN_ROLE.keys())
def test_a_runtime_role_the_cluster_does_not_create_as_required_does_not_render(args: Sequence[str]) -> None:
    stderr = helm_fails(*QUICKSTART, *args)

    assert "postgresql.cluster.roles must hold it" in stderr


def test_an_own_password_secret_is_not_rendered() -> None:
    manifests = helm_template(*QUICKSTART, "--set", "databaseRuntimeRole.create=false")

    assert not any(m["kind"] == "Secret" and m["metadata"]["name"] == "poimen-memory-db-runtime" for m in manifests)
    assert env_of(main_container(manifests))["POIMEN_DATABASE_RUNTIME_PASSWORD"]["valueFrom"]["secretKeyRef"][
        "name"
    ] == ("poimen-memory-db-runtime")


def test_a_role_name_that_is_no_plain_identifier_is_refused_by_the_schema() -> None:
    stderr = helm_fails(*QUICKSTART, "--set", "databaseRuntimeRole.name=Bad-Name")

    assert "databaseRuntimeRole" in stderr


# --- external PostgreSQL -----------------------------------------------------------------------------


def test_external_with_two_urls_migrates_as_the_owner_and_serves_as_the_runtime_role() -> None:
    manifests = helm_template(
        *EXTERNAL, "--set", f"secret.databaseUrl={RUNTIME_URL}", "--set", f"secret.ownerDatabaseUrl={OWNER_URL}"
    )
    job_url = env_of(job_containers(manifests)[-1])["DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    service_url = env_of(main_container(manifests))["DATABASE_URL"]["valueFrom"]["secretKeyRef"]

    assert secret_value(manifests, job_url["name"], job_url["key"]) == OWNER_URL
    assert secret_value(manifests, service_url["name"], service_url["key"]) == RUNTIME_URL
    assert env_of(job_containers(manifests)[-1])["DATABASE_RUNTIME_ROLE"]["value"] == "poimen_runtime"


def test_external_with_an_owner_secret_of_your_own() -> None:
    manifests = helm_template(
        *EXTERNAL,
        "--set", "existingSecret=creds",
        "--set", "migrations.ownerDatabaseUrlSecret.name=db-owner",
        "--set", "migrations.ownerDatabaseUrlSecret.key=url",
    )  # fmt: skip

    assert env_of(job_containers(manifests)[-1])["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "db-owner",
        "key": "url",
    }
    assert env_of(main_container(manifests))["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "creds"
    assert env_of(job_containers(manifests)[-1])["DATABASE_RUNTIME_ROLE"]["value"] == "poimen_runtime"


def test_external_with_one_url_keeps_one_role_and_says_it_is_weaker() -> None:
    args = (*EXTERNAL, "--set", f"secret.databaseUrl={RUNTIME_URL}")
    manifests = helm_template(*args)
    job_url = env_of(job_containers(manifests)[-1])["DATABASE_URL"]["valueFrom"]["secretKeyRef"]

    assert secret_value(manifests, job_url["name"], job_url["key"]) == RUNTIME_URL
    assert "DATABASE_RUNTIME_ROLE" not in env_of(job_containers(manifests)[-1])
    assert "the weaker guarantee" in notes(*args)
    assert "the weaker guarantee" not in notes(*args, "--set", f"secret.ownerDatabaseUrl={OWNER_URL}")


OWNER_URL_MISPLACED = {
    "with CloudNativePG": [*QUICKSTART, "--set", f"secret.ownerDatabaseUrl={OWNER_URL}"],
    "with existingSecret": [
        *EXTERNAL,
        "--set",
        "existingSecret=creds",
        "--set",
        f"secret.ownerDatabaseUrl={OWNER_URL}",
    ],
    "twice": [
        *EXTERNAL,
        "--set",
        f"secret.databaseUrl={RUNTIME_URL}",
        "--set",
        f"secret.ownerDatabaseUrl={OWNER_URL}",
        "--set",
        "migrations.ownerDatabaseUrlSecret.name=db-owner",
    ],
    "without a database": ["--set", "migrations.ownerDatabaseUrlSecret.name=db-owner"],
}


@pytest.mark.parametrize("args", OWNER_URL_MISPLACED.values(), ids=OWNER_URL_MISPLACED.keys())
def test_an_owner_url_that_would_be_ignored_does_not_render(args: Sequence[str]) -> None:
    stderr = helm_fails(*args)

    assert "ownerDatabaseUrl" in stderr
