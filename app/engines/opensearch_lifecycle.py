"""OpenSearch client and index lifecycle: the configured client, the versioned index behind its alias.

Every project has its own index (`app.engines.opensearch_projects`). `ensure_index` creates or upgrades
one of them; it runs on every replica at once, so each step tolerates another replica having done it
first. `prepare_project_indexes` runs at start: it upgrades every project index of an older schema and
finds the shared index of schema 6 and before, which `retire_shared_index` takes out of service.

Every alias read names the indexes it looks at (`GET /<indexes>/_alias/<name>`, `indexes_behind`): with none
named, OpenSearch's security plugin checks the read against every index of the cluster
(opensearch-project/security#5871), so the service's role would need `indices:admin/aliases/get` on `*`.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Final

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout, NotFoundError, RequestError, TransportError

from app.config import ConfigurationError
from app.domain.errors import EngineRejectedError, EngineUnavailableError
from app.engines.opensearch_mapping import SCHEMA_VERSION, alias_indexes_pattern, index_body, versioned_index_name
from app.engines.opensearch_projects import PROJECT_INFIX, project_aliases_pattern, shared_index_names
from app.engines.opensearch_responses import ENGINE_NAME, translate_errors

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.config import Settings

logger = logging.getLogger(__name__)


def create_opensearch_client(settings: Settings) -> AsyncOpenSearch:
    """Build the async client from settings; the app lifespan owns it and closes it.

    TLS follows the URL scheme (`https://`), with `OPENSEARCH_CA_FILE` and `OPENSEARCH_VERIFY_CERTS`.
    Basic credentials are used for `basic`. With `forward_jwt` only searches carry the caller's token;
    the service's own work (index creation, readiness, the outbox's writes) uses its own identity:
    basic credentials, or `OPENSEARCH_SERVICE_TOKEN` as a bearer token (`Settings` requires one).
    Timeouts do not retry, so a search never outlives its deadline several times over; connection errors
    and 502/503/504 retry `OPENSEARCH_MAX_RETRIES` times.
    """
    if settings.opensearch_url is None:
        msg = "OPENSEARCH_URL is not set"
        raise ConfigurationError(msg)
    if settings.opensearch_auth == "basic" and not (settings.opensearch_username and settings.opensearch_password):
        msg = "OPENSEARCH_AUTH=basic needs OPENSEARCH_USERNAME and OPENSEARCH_PASSWORD"
        raise ConfigurationError(msg)
    options: dict[str, Any] = {
        "hosts": [settings.opensearch_url],
        "timeout": settings.opensearch_timeout_s,
        "max_retries": settings.opensearch_max_retries,
        "retry_on_timeout": False,
        "retry_on_status": (502, 503, 504),
        "http_compress": True,
        "verify_certs": settings.opensearch_verify_certs,
        "ssl_show_warn": settings.opensearch_verify_certs,
    }
    if settings.opensearch_ca_file is not None:
        options["ca_certs"] = str(settings.opensearch_ca_file)
    if settings.opensearch_auth != "none" and settings.opensearch_username and settings.opensearch_password:
        options["http_auth"] = (settings.opensearch_username, settings.opensearch_password.get_secret_value())
    elif settings.opensearch_auth == "forward_jwt" and settings.opensearch_service_token is not None:
        # The service's own identity; a search that forwards its caller's token replaces this header.
        options["headers"] = {"Authorization": f"Bearer {settings.opensearch_service_token.get_secret_value()}"}
    return AsyncOpenSearch(**options)


async def indexes_behind(
    client: AsyncOpenSearch, alias: str, *, among: str, options: Mapping[str, Any] | None = None
) -> list[str]:
    """The indexes matching `among` (an index pattern) that `alias` leads to, sorted; [] when it leads to none.

    An alias leading to none of them is a 404 on OpenSearch (and on both OpenSearch-API servers the tests run
    on); an empty answer means the same.
    """
    try:
        listed = await client.indices.get_alias(index=among, name=alias, **(options or {}))
    except NotFoundError:
        return []
    return sorted(index for index, body in listed.items() if alias in body.get("aliases", {}))


UNREACHABLE_STATUSES: Final = frozenset({502, 503, 504})
"""What a cluster that is not up yet answers (the bundled OpenSearch says 503 until its security index exists)."""


async def cluster_unreachable(client: AsyncOpenSearch) -> bool:
    """Whether the cluster cannot be reached now (no connection, no answer, or a 502/503/504).

    As against a cluster that answers and refuses (bad credentials: 401/403), which no waiting will cure.
    """
    try:
        await client.info()
    except (OpenSearchConnectionError, ConnectionTimeout, TimeoutError):
        return True
    except TransportError as error:
        return error.status_code in UNREACHABLE_STATUSES
    return False


async def prepare_project_indexes(
    client: AsyncOpenSearch, *, base: str, replicas: int = 1, headers: Mapping[str, str] | None = None
) -> bool:
    """At start: bring every project index under `base` to the current schema; say whether a shared index is left.

    Each project alias on an older schema version is upgraded by `ensure_index` (new index, `_reindex`,
    alias swap). An alias a newer release has upgraded is left as it is, with a WARNING: this release's running
    replicas write through it into the newer index during a rolling update, and one starting then (or after a
    rollback) does the same, where refusing to start crash-looped it. Returns True when the alias `base`
    itself still leads to an index: the one shared index of schema version 6 and before, which held every
    project. The caller then queues every project for lexical indexing from PostgreSQL and calls
    `retire_shared_index`.
    """
    extra: dict[str, Any] = {"headers": dict(headers)} if headers else {}
    with translate_errors():
        try:
            pattern = project_aliases_pattern(base)
            listed = await client.indices.get_alias(index=pattern, name=pattern, **extra)
        except NotFoundError:
            listed = {}
        aliases = {
            alias
            for body in listed.values()
            for alias in body.get("aliases", {})
            if alias.startswith(f"{base}{PROJECT_INFIX}")
        }
        newer = sorted(
            {
                alias
                for index, body in listed.items()
                for alias in body.get("aliases", {})
                if alias in aliases and _version_of(index, alias) > SCHEMA_VERSION
            }
        )
        if newer:
            logger.warning(
                "%d project index(es) have a newer schema than this release's %d (a rolling update or a rollback):"
                " left as they are, written through their aliases; the first: %s",
                len(newer),
                SCHEMA_VERSION,
                newer[0],
            )
        for alias in sorted(aliases.difference(newer)):
            await ensure_index(client, alias=alias, shards=1, replicas=replicas, headers=headers)
        return bool(await shared_indexes_behind(client, base, extra))


async def shared_indexes_behind(client: AsyncOpenSearch, base: str, extra: Mapping[str, Any]) -> list[str]:
    """The shared indexes of schema 6 and before the alias `base` leads to, each asked by its exact name.

    One request per name: a list of names with `ignore_unavailable` is a 404 on noida-db when one is missing.
    """
    found: list[str] = []
    for name in shared_index_names(base):
        found += await indexes_behind(client, base, among=name, options=extra)
    return found


async def retire_shared_index(client: AsyncOpenSearch, *, base: str, headers: Mapping[str, str] | None = None) -> None:
    """Take the alias `base` off the shared index of schema 6 and before; the index is kept for a rollback.

    Idempotent across replicas: the alias already gone is not an error.
    """
    extra: dict[str, Any] = {"headers": dict(headers)} if headers else {}
    with translate_errors():
        shared = await shared_indexes_behind(client, base, extra)
        if not shared:
            return
        try:
            await client.indices.delete_alias(index=",".join(shared), name=base, **extra)
        except NotFoundError:
            return
    logger.warning("opensearch shared index retired", extra={"alias": base, "indexes": shared})


REINDEX_TIMEOUT_S: Final = 3600.0
"""The longest an index upgrade's `_reindex` of one project may take before the start fails. In Kubernetes the
chart's startup probe (5 minutes) bounds the start too: for a project whose copy takes longer, raise
`startupProbe.failureThreshold` for that upgrade."""


async def ensure_index(
    client: AsyncOpenSearch, *, alias: str, shards: int = 1, replicas: int = 1, headers: Mapping[str, str] | None = None
) -> str:
    """Create or verify the current index version behind `alias`; return the concrete index name.

    - No alias yet: create `<alias>-v<SCHEMA_VERSION>` with the alias attached (one atomic request).
    - Alias on the current version: verify its `_meta.schema_version`, change nothing.
    - Alias on an older version: create the new version, block writes to the old one, copy its
      documents with `_reindex` (keeping their external versions), then move the alias in one
      `update_aliases` call. The block is what keeps a write from being lost: a replica of the old
      version that writes while the copy runs is refused (its outbox keeps the entry and retries), and
      its retry after the move lands in the new index. The old index is kept, write-blocked, for a
      rollback; delete it by hand. An upgrade that fails leaves it blocked with the alias on it: searches
      go on, writes wait in the outbox until a start completes the upgrade.
    Raises `EngineRejectedError` when a concrete index already squats the alias name (that project cannot
    be indexed until it is gone), `EngineUnavailableError` when the alias points at a newer version than
    this code knows.
    """
    target, own = versioned_index_name(alias), alias_indexes_pattern(alias)
    extra: dict[str, Any] = {"headers": dict(headers)} if headers else {}
    with translate_errors():
        if await client.indices.exists_alias(index=own, name=alias, **extra):
            current = await indexes_behind(client, alias, among=own, options=extra)
            if current == [target]:
                await _verify_schema_version(client, target, extra)
                return target
            if len(current) != 1 or _version_of(current[0], alias) > SCHEMA_VERSION:
                # A newer release upgraded it (a rolling upgrade): this replica steps back, others index.
                msg = f"alias {alias} points at {current}, expected {target} or an older version"
                raise EngineUnavailableError(msg, engine=ENGINE_NAME)
            await _create_index(client, target, index_body(shards=shards, replicas=replicas), alias=None, extra=extra)
            await client.indices.put_settings(index=current[0], body={"index.blocks.write": True}, **extra)
            # Version markers are written without a refresh: make them visible to `_reindex`'s scroll.
            await client.indices.refresh(index=current[0], **extra)
            # `external` keeps each chunk's `_version` (its outbox version): a stale writer stays refused.
            # A conflict means the target already holds that version or a newer one (another replica copied
            # it first, or wrote since): nothing to copy. Aborting on it failed every replica but the first.
            await client.reindex(
                body={
                    "conflicts": "proceed",
                    "source": {"index": current[0]},
                    "dest": {"index": target, "version_type": "external"},
                },
                refresh=True,
                wait_for_completion=True,
                # The copy takes as long as the project is large: the client's request timeout (5 s by
                # default) failed the start of every replica on a project of some size, for ever.
                request_timeout=REINDEX_TIMEOUT_S,
                **extra,
            )
            try:
                await client.indices.update_aliases(
                    body={
                        "actions": [
                            {"remove": {"index": current[0], "alias": alias}},
                            {"add": {"index": target, "alias": alias}},
                        ]
                    },
                    **extra,
                )
            except NotFoundError:
                # Another replica moved the alias first (the copy above was idempotent: external versions).
                if await indexes_behind(client, alias, among=own, options=extra) != [target]:
                    raise
            logger.info("opensearch alias moved", extra={"alias": alias, "from": current[0], "to": target})
            return target
        if await client.indices.exists(index=alias, **extra):
            if await client.indices.exists_alias(index=own, name=alias, **extra):
                # `exists` resolves aliases: another replica created the index and its alias between our checks.
                return await ensure_index(client, alias=alias, shards=shards, replicas=replicas, headers=headers)
            msg = f"a concrete index named {alias} exists where the alias belongs"
            raise EngineRejectedError(msg, engine=ENGINE_NAME)
        await _create_index(client, target, index_body(shards=shards, replicas=replicas), alias=alias, extra=extra)
        return target


async def _create_index(
    client: AsyncOpenSearch, name: str, body: dict[str, Any], *, alias: str | None, extra: dict[str, Any]
) -> None:
    if await client.indices.exists(index=name, **extra):
        await _verify_schema_version(client, name, extra)
        if alias is not None:
            await client.indices.put_alias(index=name, name=alias, **extra)
        return
    try:
        await client.indices.create(index=name, body=body | ({"aliases": {alias: {}}} if alias else {}), **extra)
    except RequestError as error:
        # Replicas start together: another one may have created it between our check and our create.
        if error.error != "resource_already_exists_exception":
            raise
        await _verify_schema_version(client, name, extra)
        if alias is not None:
            await client.indices.put_alias(index=name, name=alias, **extra)


async def _verify_schema_version(client: AsyncOpenSearch, name: str, extra: dict[str, Any]) -> None:
    mapping = await client.indices.get_mapping(index=name, **extra)
    found = mapping.get(name, {}).get("mappings", {}).get("_meta", {}).get("schema_version")
    if found != SCHEMA_VERSION:
        msg = f"index {name} has schema version {found!r}, expected {SCHEMA_VERSION}"
        raise EngineRejectedError(msg, engine=ENGINE_NAME)


def _version_of(index: str, alias: str) -> int:
    version = re.fullmatch(rf"{re.escape(alias)}_?-v(\d+)", index)
    return int(version.group(1)) if version else 0
