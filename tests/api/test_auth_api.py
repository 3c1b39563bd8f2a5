"""Issue 5 acceptance: the JWT matrix through HTTP on the embedded default (real app, real engines).

Project alpha holds a secret document (one unique word, `SECRET_WORD`). Every refused call, on every
read path (each strategy of `/memory/query`, `POST /v1/search`, `GET` document), must answer with the
expected status and never contain that word; the cache is warmed with a valid alpha query first, so a
refused or other-project call that were served from it would leak the word. Logs are captured during
the matrix and must never hold a raw token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from prometheus_client import REGISTRY

from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder

pytestmark = pytest.mark.integration

SECRET = "matrix-secret-" + "0123456789abcdef" * 3
OTHER_SECRET = "other-secret-" + "fedcba9876543210" * 3
ISSUER = "https://issuer.poimen.test"
AUDIENCE = "poimen-api"
SECRET_WORD = "swordfishquokka"
QUERY = "zebra protocol password"
SECRET_DOCUMENT_ID = "secret-doc"
STRATEGIES = ("semantic", "lexical", "hybrid")
SUFFIX = uuid.uuid4().hex[:8]
ALPHA = f"alpha-{SUFFIX}"
BETA = f"beta-{SUFFIX}"
NOWHERE = f"nowhere-{SUFFIX}"  # a project nobody ever created


def hs256(secret: str | bytes = SECRET, **overrides: Any) -> str:
    """A token with sensible claims for the matrix app; `None` overrides remove a claim."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": "matrix-tester",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 600,
        "projects": [ALPHA],
        "scope": "search",
    }
    claims.update(overrides)
    return jwt.encode({key: value for key, value in claims.items() if value is not None}, secret, algorithm="HS256")


def hs256_with_header(**header: object) -> str:
    """A token valid in every claim, with `header` added to its JOSE header."""
    return jwt.encode(jwt.decode(hs256(), options={"verify_signature": False}), SECRET, headers=header)


def hs256_typed(typ: str) -> str:
    """A token valid in every claim whose `typ` header says it is another kind of JWT than an access token."""
    return hs256_with_header(typ=typ)


def hmac_token_signed_with(key_bytes: bytes, claims: dict[str, Any]) -> str:
    """An HS256 token whose HMAC key is `key_bytes` (PyJWT refuses to sign with a PEM, so by hand)."""

    def segment(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    signing_input = f"{segment({'alg': 'HS256', 'typ': 'JWT'})}.{segment(claims)}"
    signature = hmac.new(key_bytes, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class Refusal:
    """A token the service must refuse, and the status it must refuse it with."""

    token: str | None
    status: int


def matrix() -> dict[str, Refusal]:
    """Every refused case of the issue's acceptance list; built per call so `exp`/`nbf` are fresh."""
    now = int(time.time())
    return {
        "no token": Refusal(None, 401),
        "garbage": Refusal("abc.def.ghi", 401),
        "not a jwt at all": Refusal("not-a-token", 401),
        "expired": Refusal(hs256(exp=now - 3600, iat=now - 7200), 401),
        "not yet valid": Refusal(hs256(nbf=now + 3600), 401),
        "issued in the future": Refusal(hs256(iat=now + 3600, exp=now + 4200), 401),
        "unknown critical extension": Refusal(hs256_with_header(crit=["exp-ext"]), 401),
        "no exp": Refusal(hs256(exp=None), 401),
        "a century long": Refusal(hs256(exp=now + 100 * 365 * 24 * 3600), 401),  # over JWT_MAX_LIFETIME_S
        "wrong key": Refusal(hs256(OTHER_SECRET), 401),
        "alg none": Refusal(
            jwt.encode(
                {"sub": "x", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 600, "projects": [ALPHA], "scope": "search"},
                None,
                algorithm="none",
            ),
            401,
        ),
        "wrong audience": Refusal(hs256(aud="someone-else"), 401),
        "wrong issuer": Refusal(hs256(iss="https://evil.example"), 401),
        # The same issuer's other JWTs (RFC 8725 §3.11): signed with the same key, for the same audience.
        "logout token": Refusal(hs256_typed("logout+jwt"), 401),
        "security event token": Refusal(hs256_typed("secevent+jwt"), 401),
        "DPoP proof": Refusal(hs256_typed("dpop+jwt"), 401),
        "wrong project": Refusal(hs256(projects=[BETA], scope="search ingest"), 403),
        "no project": Refusal(hs256(projects=None), 403),
        "missing scope (ingest-only searching)": Refusal(hs256(scope="ingest"), 403),
    }


async def read_everything(
    client: AsyncTestClient[Litestar], project: str, token: str | None
) -> dict[str, tuple[int, str, dict[str, str]]]:
    """Every read path of `project`: status, body text and headers per path."""
    headers = bearer(token)
    answers: dict[str, tuple[int, str, dict[str, str]]] = {}
    for strategy in STRATEGIES:
        response = await client.get(
            "/memory/query", params={"query": QUERY, "project": project, "strategy": strategy}, headers=headers
        )
        answers[f"memory_query/{strategy}"] = (response.status_code, response.text, dict(response.headers))
    for strategy in STRATEGIES:
        response = await client.post(
            "/v1/search", json={"query": QUERY, "project": project, "strategy": strategy}, headers=headers
        )
        answers[f"v1_search/{strategy}"] = (response.status_code, response.text, dict(response.headers))
    response = await client.get(f"/v1/projects/{project}/documents/{SECRET_DOCUMENT_ID}", headers=headers)
    answers["get_document"] = (response.status_code, response.text, dict(response.headers))
    return answers


async def wait_lexically_indexed(
    client: AsyncTestClient[Litestar], project: str, document_id: str, token: str, *, timeout_s: float = 15.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/projects/{project}/documents/{document_id}", headers=bearer(token))
        if response.status_code == 200 and response.json()["lexically_indexed"]:
            return
        await asyncio.sleep(0.05)
    msg = f"{document_id} not lexically indexed within {timeout_s} s"
    raise AssertionError(msg)


def secret_document(document_id: str = SECRET_DOCUMENT_ID) -> dict[str, Any]:
    return {
        "id": document_id,
        "source": "vault/zebra.md",
        "title": "Zebra",
        "text": f"# Zebra\n\nThe zebra protocol password is {SECRET_WORD}.\n",
    }


@pytest.fixture(scope="module")
async def jwt_client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """The app with `AUTH_MODE=jwt` (HS256, issuer and audience configured), alpha and beta seeded."""
    data_dir = tmp_path_factory.mktemp("auth-api")
    settings = api_settings(
        data_dir,
        auth_mode="jwt",
        jwt_secret=SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        jwt_leeway_s=5.0,
        # The matrix sends hundreds of refusals from the test client's one address; `limited_client` below
        # tests the limit on refused authentications.
        rate_limit_refused_auth_per_address_rps=0.0,
    )
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as client,
    ):
        writer = hs256(projects=[ALPHA, BETA], scope="ingest search")
        created = await client.post(f"/v1/projects/{ALPHA}/documents", json=secret_document(), headers=bearer(writer))
        assert created.status_code == 201, created.text
        beta_document = {
            "id": "beta-doc",
            "source": "beta/zebra.md",
            "title": "Zebra",
            "text": "# Zebra\n\nThe zebra protocol in beta uses public keys, no password at all.\n",
        }
        created = await client.post(f"/v1/projects/{BETA}/documents", json=beta_document, headers=bearer(writer))
        assert created.status_code == 201, created.text
        await wait_lexically_indexed(client, ALPHA, SECRET_DOCUMENT_ID, writer)
        await wait_lexically_indexed(client, BETA, "beta-doc", writer)
        yield client


@pytest.fixture
async def warm_cache(jwt_client: AsyncTestClient[Litestar]) -> None:
    """A valid alpha query on every read path, so each answer sits in the query cache."""
    answers = await read_everything(jwt_client, ALPHA, hs256())
    for path, (status, text, _) in answers.items():
        assert status == 200, (path, text)
        assert SECRET_WORD in text, path


# --- the matrix -------------------------------------------------------------------------------------


async def test_a_valid_token_reads_its_project_on_every_path(jwt_client: AsyncTestClient[Litestar]) -> None:
    token = hs256()

    answers = await read_everything(jwt_client, ALPHA, token)

    for path, (status, text, _) in answers.items():
        assert status == 200, (path, text)
        assert SECRET_WORD in text, path
    hybrid = json.loads(answers["memory_query/hybrid"][1])
    top = hybrid["results"][0]
    assert top["document_id"] == SECRET_DOCUMENT_ID
    # Both legs found it: the hybrid answer is the fused result of vectors and BM25.
    assert top["score_breakdown"]["semantic_rank"] == 1
    assert top["score_breakdown"]["lexical_rank"] == 1


@pytest.mark.parametrize("case", list(matrix()))
async def test_a_refused_token_gets_its_status_and_nothing_of_alpha(
    jwt_client: AsyncTestClient[Litestar], warm_cache: None, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    refusal = matrix()[case]
    caplog.set_level(logging.DEBUG)

    answers = await read_everything(jwt_client, ALPHA, refusal.token)

    for path, (status, text, headers) in answers.items():
        assert status == refusal.status, (path, text)
        assert SECRET_WORD not in text, path
        assert json.loads(text)["status"] == refusal.status
        if refusal.status == 401:
            assert headers.get("www-authenticate", "").startswith("Bearer"), path
        else:
            assert "www-authenticate" not in headers, path
    assert any("refused" in record.getMessage() for record in caplog.records), "refusals are logged"
    if refusal.token is not None:
        assert_token_not_logged(caplog, refusal.token)


@pytest.fixture
async def limited_client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path: Path
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """The JWT app allowing 2 refused authentications per address at once, then 1 per 1,000 s."""
    settings = api_settings(
        tmp_path,
        auth_mode="jwt",
        jwt_secret=SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        rate_limit_refused_auth_per_address_rps=0.001,
        rate_limit_refused_auth_burst=2,
    )
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as client,
    ):
        yield client


def refused_auth_shed() -> float:
    return REGISTRY.get_sample_value("poimen_requests_shed_total", {"reason": "refused_auth"}) or 0.0


async def test_refused_authentications_past_the_address_burst_are_answered_429_with_retry_after(
    limited_client: AsyncTestClient[Litestar],
) -> None:
    # The per-caller limit keys on the verified subject: a client sending bad tokens was never slowed.
    before = refused_auth_shed()
    now = int(time.time())
    stats = f"/v1/projects/{ALPHA}"
    refusals = [
        await limited_client.get(stats, headers=bearer(hs256(OTHER_SECRET))),
        await limited_client.get(stats, headers=bearer(hs256(projects=[BETA]))),
        await limited_client.get(stats, headers=bearer(hs256(exp=now - 3600, iat=now - 7200))),
        await limited_client.post("/v1/search", json={"query": QUERY, "project": BETA}, headers=bearer(hs256())),
    ]

    assert [answer.status_code for answer in refusals] == [401, 403, 429, 429]
    for answer in refusals[2:]:
        assert int(answer.headers["retry-after"]) >= 1
        assert answer.json()["status"] == 429
        assert "www-authenticate" not in answer.headers
    assert refusals[2].json()["detail"] == (
        "too many refused authentications from this address; this request's: the bearer token has expired"
    )
    assert refusals[3].json()["detail"] == (
        "too many refused authentications from this address; this request's: "
        "the token does not grant access to this project"
    )
    # What a client keys on not to send the same token again: the status the refusal would have had.
    assert [answer.json()["refused_status"] for answer in refusals[2:]] == [401, 403]
    assert refused_auth_shed() == before + 2


async def test_a_valid_token_is_served_from_an_address_over_its_refused_authentications(
    limited_client: AsyncTestClient[Litestar],
) -> None:
    # Refusals claiming the tenant's own subject, from the tenant's own address, do not lock the tenant out.
    stats = f"/v1/projects/{ALPHA}"
    forged = [await limited_client.get(stats, headers=bearer(hs256(OTHER_SECRET))) for _ in range(3)]

    valid = [await limited_client.get(stats, headers=bearer(hs256())) for _ in range(3)]
    refused_again = await limited_client.get(stats, headers=bearer(hs256(OTHER_SECRET)))

    assert [answer.status_code for answer in forged] == [401, 401, 429]
    assert [answer.status_code for answer in valid] == [200, 200, 200]
    assert refused_again.status_code == 429


def assert_token_not_logged(caplog: pytest.LogCaptureFixture, token: str) -> None:
    """Neither the token nor its signature segment in any message, argument or `extra` field."""
    signature = token.rsplit(".", 1)[-1]
    for record in caplog.records:
        rendered = record.getMessage() + repr(record.__dict__)
        assert token not in rendered, record.getMessage()
        if len(signature) >= 16:  # a short segment ("ghi") could occur by chance
            assert signature not in rendered, record.getMessage()


async def test_a_search_only_token_cannot_ingest_or_delete(jwt_client: AsyncTestClient[Litestar]) -> None:
    token = hs256(scope="search")
    overwrite = secret_document() | {"text": "# Zebra\n\nOverwritten by a reader."}

    ingested = await jwt_client.post(f"/v1/projects/{ALPHA}/documents", json=overwrite, headers=bearer(token))
    deleted = await jwt_client.delete(f"/v1/projects/{ALPHA}/documents/{SECRET_DOCUMENT_ID}", headers=bearer(token))
    document = await jwt_client.get(f"/v1/projects/{ALPHA}/documents/{SECRET_DOCUMENT_ID}", headers=bearer(token))

    assert (ingested.status_code, deleted.status_code) == (403, 403)
    assert SECRET_WORD in document.text
    assert "Overwritten" not in document.text


async def test_a_token_for_another_project_cannot_write_into_alpha(jwt_client: AsyncTestClient[Litestar]) -> None:
    beta_writer = hs256(projects=[BETA], scope="ingest search")
    overwrite = secret_document() | {"text": "# Zebra\n\nOverwritten from beta."}

    ingested = await jwt_client.post(f"/v1/projects/{ALPHA}/documents", json=overwrite, headers=bearer(beta_writer))
    deleted = await jwt_client.delete(
        f"/v1/projects/{ALPHA}/documents/{SECRET_DOCUMENT_ID}", headers=bearer(beta_writer)
    )
    document = await jwt_client.get(f"/v1/projects/{ALPHA}/documents/{SECRET_DOCUMENT_ID}", headers=bearer(hs256()))

    assert (ingested.status_code, deleted.status_code) == (403, 403)
    assert SECRET_WORD in document.text


async def test_another_projects_token_on_its_own_project_gets_nothing_of_alpha_from_the_cache(
    jwt_client: AsyncTestClient[Litestar], warm_cache: None
) -> None:
    for token in (hs256(projects=[BETA]), hs256(projects="*")):
        answers = await read_everything(jwt_client, BETA, token)

        for path, (status, text, _) in answers.items():
            if path == "get_document":
                assert status == 404, text  # beta has no document with alpha's id
            else:
                assert status == 200, (path, text)
                body = json.loads(text)
                assert body["project"] == BETA
                assert {hit["document_id"] for hit in body["results"]} <= {"beta-doc"}
            assert SECRET_WORD not in text, path


async def test_the_cache_is_shared_only_by_tokens_with_the_same_grants(jwt_client: AsyncTestClient[Litestar]) -> None:
    params = {"query": "zebra protocol password cache probe", "project": ALPHA}

    first = await jwt_client.get("/memory/query", params=params, headers=bearer(hs256(sub="first")))
    same_grants = await jwt_client.get("/memory/query", params=params, headers=bearer(hs256(sub="second")))
    wider = await jwt_client.get("/memory/query", params=params, headers=bearer(hs256(projects=[ALPHA, BETA])))
    more_scopes = await jwt_client.get("/memory/query", params=params, headers=bearer(hs256(scope="search ingest")))

    assert [r.status_code for r in (first, same_grants, wider, more_scopes)] == [200] * 4
    assert first.json()["cached"] is False
    assert same_grants.json()["cached"] is True  # the entry exists: equal grants reuse it
    assert wider.json()["cached"] is False
    assert more_scopes.json()["cached"] is False


async def test_refusals_do_not_reveal_whether_a_project_exists(jwt_client: AsyncTestClient[Litestar]) -> None:
    beta_token = hs256(projects=[BETA])
    for token in (None, "abc.def.ghi", beta_token, hs256(scope="ingest")):
        existing = await read_everything(jwt_client, ALPHA, token)
        missing = await read_everything(jwt_client, NOWHERE, token)

        for path, (status, text, _) in existing.items():
            assert status in {401, 403}, (path, text)
            assert (status, text) == missing[path][:2], path
            assert ALPHA not in text, path
    missing_document = await jwt_client.get(
        f"/v1/projects/{ALPHA}/documents/no-such-document", headers=bearer(beta_token)
    )
    existing_document = await jwt_client.get(
        f"/v1/projects/{ALPHA}/documents/{SECRET_DOCUMENT_ID}", headers=bearer(beta_token)
    )
    assert (missing_document.status_code, missing_document.text) == (403, existing_document.text)


async def test_a_caller_without_a_valid_token_is_401_even_for_a_malformed_project_id(
    jwt_client: AsyncTestClient[Litestar],
) -> None:
    # The project id was checked first: a caller with no token got 400s that mapped the id rule.
    for token in (None, "abc.def.ghi"):
        answers = await read_everything(jwt_client, "Bad Project!", token)
        for path, (status, text, _) in answers.items():
            assert status == 401, (path, text)
    wildcard = await jwt_client.get("/v1/projects/Bad%20Project!/documents", headers=bearer(hs256(projects="*")))
    assert wildcard.status_code == 400


async def test_the_projects_listing_names_only_the_projects_a_token_grants(
    jwt_client: AsyncTestClient[Litestar],
) -> None:
    granted = await jwt_client.get("/v1/projects", headers=bearer(hs256(projects=[ALPHA, "no-documents-here"])))
    every = await jwt_client.get("/v1/projects", params={"limit": 1000}, headers=bearer(hs256(projects="*")))
    none = await jwt_client.get("/v1/projects", headers=bearer(hs256(projects=None)))
    ingest_only = await jwt_client.get("/v1/projects", headers=bearer(hs256(projects="*", scope="ingest")))

    assert granted.status_code == 200, granted.text
    assert granted.json() == {"items": [{"project": ALPHA}], "next_cursor": None}  # a project holds documents
    assert every.status_code == 200, every.text
    assert {ALPHA, BETA} <= {item["project"] for item in every.json()["items"]}
    assert none.json() == {"items": [], "next_cursor": None}  # no `projects` claim grants no project
    assert ingest_only.status_code == 403


async def test_a_documents_version_says_nothing_of_another_projects_writes(
    jwt_client: AsyncTestClient[Litestar],
) -> None:
    # Versions came from one sequence for every project: two writes of alpha told alpha's tenant how many
    # documents every other tenant wrote in between (and when).
    alpha_writer = hs256(scope="search ingest")
    beta_writer = hs256(projects=[BETA], scope="search ingest")
    first = await jwt_client.post(
        f"/v1/projects/{ALPHA}/documents", json={"id": "count-1", "text": "one"}, headers=bearer(alpha_writer)
    )
    await wait_lexically_indexed(jwt_client, ALPHA, "count-1", alpha_writer)
    beta_batch = {"documents": [{"id": f"count-{n}", "text": f"beta writes {n}"} for n in range(20)]}
    others = await jwt_client.post(f"/v1/projects/{BETA}/documents", json=beta_batch, headers=bearer(beta_writer))
    second = await jwt_client.post(
        f"/v1/projects/{ALPHA}/documents", json={"id": "count-2", "text": "two"}, headers=bearer(alpha_writer)
    )

    assert [answer.status_code for answer in (first, others, second)] == [201, 201, 201]
    gap = second.json()["documents"][0]["version"] - first.json()["documents"][0]["version"]
    # Alpha's own changes only: its write of count-1 and, once, that document's lexical indexing (beta's 20: none).
    assert 1 <= gap <= 2


async def test_admin_flags_need_the_admin_scope(jwt_client: AsyncTestClient[Litestar]) -> None:
    anonymous = await jwt_client.get("/admin/flags")
    reader = await jwt_client.get("/admin/flags", headers=bearer(hs256(scope="search ingest", projects="*")))
    admin = await jwt_client.get("/admin/flags", headers=bearer(hs256(scope="admin", projects=[])))

    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert reader.status_code == 403
    assert admin.status_code == 200, admin.text


# --- asymmetric keys ----------------------------------------------------------------------------------


def public_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class KeySetup:
    """One asymmetric configuration: the settings it needs and how to sign a valid token."""

    settings: dict[str, Any]
    sign: Callable[[dict[str, Any]], str]
    sign_with_wrong_key: Callable[[dict[str, Any]], str]
    public_key_pem: bytes


def key_setup(kind: str, folder: Path) -> KeySetup:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    if kind == "rs256-pem":
        (folder / "public.pem").write_bytes(public_pem(rsa_key))
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return KeySetup(
            {"jwt_public_key_file": folder / "public.pem"},
            lambda claims: jwt.encode(claims, rsa_key, algorithm="RS256"),
            lambda claims: jwt.encode(claims, other, algorithm="RS256"),
            public_pem(rsa_key),
        )
    if kind == "es256-pem":
        (folder / "public.pem").write_bytes(public_pem(ec_key))
        other_ec = ec.generate_private_key(ec.SECP256R1())
        return KeySetup(
            {"jwt_public_key_file": folder / "public.pem"},
            lambda claims: jwt.encode(claims, ec_key, algorithm="ES256"),
            lambda claims: jwt.encode(claims, other_ec, algorithm="ES256"),
            public_pem(ec_key),
        )
    rsa_jwk = jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True) | {"kid": "rsa-1", "alg": "RS256"}
    ec_jwk = jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True) | {"kid": "ec-1", "alg": "ES256"}
    (folder / "jwks.json").write_text(json.dumps({"keys": [rsa_jwk, ec_jwk]}))
    return KeySetup(
        {"jwt_jwks_file": folder / "jwks.json"},
        # Alternate keys by `kid`: a valid token of each kind must work.
        lambda claims: jwt.encode(
            claims,
            ec_key if claims["sub"].endswith("ec") else rsa_key,
            algorithm="ES256" if claims["sub"].endswith("ec") else "RS256",
            headers={"kid": "ec-1" if claims["sub"].endswith("ec") else "rsa-1"},
        ),
        # The right `kid`, the wrong private key.
        lambda claims: jwt.encode(
            claims,
            rsa.generate_private_key(public_exponent=65537, key_size=2048),
            algorithm="RS256",
            headers={"kid": "rsa-1"},
        ),
        public_pem(rsa_key),
    )


@pytest.mark.parametrize("kind", ["rs256-pem", "es256-pem", "jwks"])
async def test_asymmetric_keys_work_end_to_end(
    kind: str,
    api_postgres_url: str,
    embedder: ServingEmbedder,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    setup = key_setup(kind, tmp_path)
    project = f"keys-{kind}-{SUFFIX}"
    now = int(time.time())
    claims = {"sub": "key-tester", "exp": now + 600, "projects": [project], "scope": "search ingest"}
    settings = api_settings(tmp_path / "data", auth_mode="jwt", **setup.settings)
    caplog.set_level(logging.DEBUG)
    confusion = hmac_token_signed_with(setup.public_key_pem, claims)
    wrong_key = setup.sign_with_wrong_key(claims)
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as client,
    ):
        created = await client.post(
            f"/v1/projects/{project}/documents", json=secret_document(), headers=bearer(setup.sign(claims))
        )
        refused = {
            "HS/RS confusion": await read_everything(client, project, confusion),
            "wrong key": await read_everything(client, project, wrong_key),
            "alg none": await read_everything(client, project, jwt.encode(claims, None, algorithm="none")),
            "HS256 secret": await read_everything(client, project, jwt.encode(claims, SECRET, algorithm="HS256")),
        }
        # Semantic: the vector leg reads PostgreSQL directly, so no wait for this app's outbox.
        valid = [
            await client.get(
                "/memory/query",
                params={"query": QUERY, "project": project, "strategy": "semantic"},
                headers=bearer(setup.sign(claims | {"sub": subject})),
            )
            for subject in ("key-tester-rsa", "key-tester-ec")
        ]

    assert created.status_code == 201, created.text
    for case, answers in refused.items():
        for path, (status, text, headers) in answers.items():
            assert status == 401, (case, path, text)
            assert headers["www-authenticate"].startswith("Bearer")
            assert SECRET_WORD not in text, (case, path)
    for response in valid if kind == "jwks" else valid[:1]:
        assert response.status_code == 200, response.text
        assert response.json()["results"][0]["document_id"] == SECRET_DOCUMENT_ID
    for token in (confusion, wrong_key):
        assert_token_not_logged(caplog, token)


async def test_a_token_for_a_deleted_project_reads_nothing_of_it_not_even_from_the_cache(
    jwt_client: AsyncTestClient[Litestar],
) -> None:
    gamma = f"gamma-{SUFFIX}"
    writer = hs256(projects=[gamma], scope="search ingest")
    created = await jwt_client.post(f"/v1/projects/{gamma}/documents", json=secret_document(), headers=bearer(writer))
    await wait_lexically_indexed(jwt_client, gamma, SECRET_DOCUMENT_ID, writer)
    reader = hs256(projects=[gamma])
    before = await read_everything(jwt_client, gamma, reader)  # every read path answered, so cached

    deleted = await jwt_client.delete(f"/v1/projects/{gamma}", headers=bearer(hs256(projects=[gamma], scope="admin")))
    after = await read_everything(jwt_client, gamma, reader)

    assert created.status_code == 201, created.text
    assert all(SECRET_WORD in text for _, text, _ in before.values())
    assert deleted.status_code in {200, 202, 204}, deleted.text
    for path, (status, text, _) in after.items():
        assert status == (404 if path == "get_document" else 200), (path, text)
        assert SECRET_WORD not in text, path
