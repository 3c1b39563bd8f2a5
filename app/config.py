"""Settings: one object read from the environment (and `.env`), validated at start.

Env names are the public interface; the reference names (`RRF_K_CONSTANT`, `SEARCH_STRATEGY`, ...)
work as written. Build it with `get_settings()`, never at import time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path  # noqa: TC003 - pydantic reads the fields' annotations at run time
from typing import Any, Final, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo  # noqa: TC002 - the source's signature, as pydantic-settings declares it
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.database_url import database_url_problem
from app.engine_settings import EngineSettings
from app.knobs import SearchKnobs, is_blank
from app.opensearch_url import opensearch_url_problem

SEARCH_BATCH_MAX_QUERIES_CEILING: Final = 1000
MAX_BATCH_DOCUMENTS_CEILING: Final = 10_000
"""The largest values these settings take. The request schemas bound their lists by them, so a body of
millions of items is refused while it is decoded instead of after (3,000,000 queries held 1.1 GB for 6 s)."""


class BlankIsUnset(PydanticBaseSettingsSource):
    """A settings source with its empty or blank values left out: every setting reads `FOO=` as not set.

    Helm and compose write `FOO: ""` for a value left out: the default applies, or a source below (`.env`). A list
    of fields missed some: `POIMEN_FLAGS_FILE=` watched the current directory, `OPENSEARCH_CA_FILE=` trusted it.
    """

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """The wrapped source's answer (pydantic-settings calls `__call__`; this is the abstract method)."""
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        """The wrapped source's values less the empty and blank ones."""
        return {name: value for name, value in self._source().items() if not is_blank(value)}


class ConfigurationError(Exception):
    """An environment value failed validation; the message is one line naming the variable."""


# The engines' settings (`app/engine_settings.py`) and the search knobs (`app/knobs.py`) are inherited with their
# env names. The bases' order keeps each field's place (knobs, engines, then these), and so the order of errors.
class Settings(BaseSettings, EngineSettings, SearchKnobs):
    """Every knob of the service. Field `x_y` is read from env `X_Y` (case-insensitive)."""

    # No infinity: `JWT_LEEWAY_S=inf` accepted every expired token and `OUTBOX_LEASE_S=inf` stopped all
    # lexical indexing in silence (PostgreSQL: "interval out of range"). NaN was refused already.
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True, allow_inf_nan=False)

    # Search knobs (`app/knobs.py`) are inherited with their env names. Settings that only start-up reads:
    query_cache_max_size: int = Field(default=10000, ge=0)
    # Memory the cached answers may hold (estimated); with the entry count, the tighter bound wins.
    query_cache_max_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    poimen_flags_file: Path | None = None
    flags_poll_interval_s: float = Field(default=2.0, gt=0)
    # Where the knobs come from while running: `file` (env + POIMEN_FLAGS_FILE) or `openfeature` (README "Flags").
    flags_provider: Literal["file", "openfeature"] = "file"
    # With FLAGS_PROVIDER=openfeature: `flagd`, or `module:factory` returning another OpenFeature provider.
    openfeature_provider: str = "flagd"
    flags_provider_wait_s: float = Field(default=5.0, ge=0)  # start-up wait for the provider; defaults until then
    # flagd's own variables (its provider reads the other FLAGD_* itself). No resolver: in-process with a
    # flag file, else flagd's default `rpc` (a sidecar at FLAGD_HOST:FLAGD_PORT, 8013; in-process sync 8015).
    flagd_resolver: Literal["rpc", "in-process", "file"] | None = None
    flagd_offline_flag_source_path: Path | None = None
    flagd_host: str = "localhost"
    flagd_port: int | None = Field(default=None, ge=1, le=65535)
    # Reference alias of RRF_FINAL_K; `SearchKnobs` moves it there (both set differently: an error).
    final_result_k: int | None = Field(default=None, ge=1, le=100, exclude=True)
    # Reference names this service cannot honour stop start-up with what to use instead (`_refused`).
    enable_semantic_fallback: bool = True
    chunk_dedup_enabled: bool = True
    pgvector_index_lists: int | None = None
    opensearch_refresh_interval: str | None = None

    # The second stage (docs/operations.md "Second stage"): off, the bundled learned ranker, or a cross-encoder
    # from a local folder. Read at start only: the model is loaded once.
    reranker: Literal["none", "learned", "cross-encoder"] = "none"
    reranker_model_path: Path | None = None  # learned: another model file; cross-encoder: required, a folder
    rerank_top_n: int = Field(default=20, ge=2, le=1000)  # the bundled model was chosen at 20 (docs/evaluation.md)
    rerank_timeout_ms: int = Field(default=1000, ge=1, le=60000)

    # A deployment's vocabulary (docs/operations.md "Query vocabulary"): a JSON file of abbreviations to expand
    # and names to recognise in any case, read once at start; its abbreviations extend the bundled table or
    # replace it. Unset: the bundled table alone.
    query_vocabulary_path: Path | None = None
    query_vocabulary_mode: Literal["extend", "replace"] = "extend"

    # Most queries one `POST /v1/search/batch` may carry (more: a 400 naming `queries`).
    search_batch_max_queries: int = Field(default=32, ge=1, le=SEARCH_BATCH_MAX_QUERIES_CEILING)

    # Ingestion.
    max_document_bytes: int = Field(default=5_000_000, ge=1)
    max_batch_documents: int = Field(default=500, ge=1, le=MAX_BATCH_DOCUMENTS_CEILING)
    chunk_max_chars: int = Field(default=1500, ge=200)
    chunk_overlap_chars: int = Field(default=200, ge=0)
    chunk_min_chars: int = Field(default=40, ge=0)
    outbox_batch_size: int = Field(default=200, ge=1)
    outbox_poll_interval_s: float = Field(default=0.5, gt=0)
    outbox_max_backoff_s: float = Field(default=30.0, gt=0)
    # A claimed outbox entry stays with its worker this long; then any process may take it (a crash).
    outbox_lease_s: float = Field(default=60.0, gt=0, le=86400)

    # Auth.
    auth_mode: Literal["off", "jwt"] = "off"
    jwt_secret: SecretStr | None = None
    jwt_public_key_file: Path | None = None
    jwt_jwks_file: Path | None = None
    # How often the key file above is re-read, so a rotated Secret's keys apply without a restart.
    jwt_key_file_poll_interval_s: float = Field(default=10.0, gt=0)
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    # Clock skew tolerated on `exp`/`nbf`: minutes at most (a day of leeway is an expiry turned off).
    jwt_leeway_s: float = Field(default=30.0, ge=0, le=300)
    # The longest a token may be valid (`exp - iat`, or `exp - now` without `iat`): a leaked one stops working.
    jwt_max_lifetime_s: float = Field(default=86400.0, gt=0, le=366 * 86400)

    # Serving and observability.
    # Requests in flight per process before the next is shed with 503 + Retry-After (probes never are).
    max_concurrent_requests: int = Field(default=256, ge=1)
    poimen_host: str = "127.0.0.1"
    poimen_port: int = Field(default=8080, ge=1, le=65535)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # JSON lines (containers, log shippers) or plain text; `auto`: plain text on a terminal, JSON otherwise.
    log_json: bool | Literal["auto"] = "auto"
    otel_exporter_otlp_endpoint: str | None = None
    otel_service_name: str = "poimen-memory"
    metrics_enabled: bool = True
    tracing_enabled: bool = True
    # One INFO line per request (`poimen.access`: route, status, duration, bytes, project, subject); off, none is made.
    access_log_enabled: bool = False
    # The search console at /console (a static page; its API calls carry the token pasted into it).
    console_enabled: bool = True

    @property
    def embedded_postgres_dir(self) -> Path:
        """Where the embedded PostgreSQL keeps its cluster (used when `DATABASE_URL` is unset)."""
        return self.poimen_data_dir / "postgres"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The usual sources in their usual order, each read with its empty values left out (`BlankIsUnset`)."""
        sources = (init_settings, env_settings, dotenv_settings, file_secret_settings)
        return tuple(BlankIsUnset(settings_cls, source) for source in sources)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_case(cls, value: object) -> object:
        # `LOG_LEVEL=debug` is what people type (SEARCH_STRATEGY and RANKING_ALGORITHM take any case too).
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("auth_mode", "opensearch_auth", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("opensearch_index")
    @classmethod
    def _not_nested(cls, value: str) -> str:
        # Project names are `<base>-p-<project>`: `poimen-p` + `-p-notes` is `poimen` + `-p-p-notes`, and a
        # deployment on `poimen` would list, write and prune the other's indexes (docs/operations.md).
        if "-p-" in value or value.endswith("-p"):
            msg = f"OPENSEARCH_INDEX={value!r} must not contain '-p-' nor end with '-p': another base's project names"
            raise ValueError(msg + " could then start with it, and the two deployments would share indexes")
        return value

    @model_validator(mode="after")
    def _refused(self) -> Settings:
        if not self.enable_semantic_fallback:
            msg = (
                "ENABLE_SEMANTIC_FALLBACK=false is not supported: a failing leg always degrades to the other"
                " (see degraded_reasons); use SEARCH_STRATEGY to run one leg"
            )
            raise ValueError(msg)
        if not self.chunk_dedup_enabled:
            msg = "CHUNK_DEDUP_ENABLED=false is not supported: unchanged chunks are always skipped by content hash"
            raise ValueError(msg)
        if self.pgvector_index_lists is not None:
            msg = "PGVECTOR_INDEX_LISTS configures IVFFlat; the vector index is HNSW: set HNSW_EF_SEARCH instead"
            raise ValueError(msg)
        if self.opensearch_shards != 1:
            msg = (
                f"OPENSEARCH_SHARDS={self.opensearch_shards} is not supported: every project has its own index of one"
                " primary shard, so its BM25 statistics are its own; set 1 or unset it (scale with OPENSEARCH_REPLICAS)"
            )
            raise ValueError(msg)
        if self.opensearch_refresh_interval is not None:
            msg = (
                "OPENSEARCH_REFRESH_INTERVAL is not read: the outbox refreshes after each batch;"
                " set the index's refresh_interval in OpenSearch"
            )
            raise ValueError(msg)
        return self

    @field_validator("opensearch_url")
    @classmethod
    def _opensearch_url_is_a_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        problem = opensearch_url_problem(text)
        if problem is not None:
            raise ValueError(problem)
        return text

    @field_validator("database_url")
    @classmethod
    def _database_url_is_postgresql(cls, value: str | None) -> str | None:
        # Refused here in one line; it reached SQLAlchemy's URL parser (or a MySQL driver import) as a traceback.
        if value is None:
            return None
        text = value.strip()
        problem = database_url_problem(text)
        if problem is not None:
            raise ValueError(problem)
        return text

    @model_validator(mode="after")
    def _runtime_role_needs_a_database(self) -> Settings:
        if self.database_runtime_role is not None and self.database_url is None:
            msg = (
                "DATABASE_RUNTIME_ROLE grants a role of an external database: set DATABASE_URL (the tables' owner)"
                " too; the embedded server makes its own runtime role"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _reranker_model_path_is_used(self) -> Settings:
        if self.reranker == "cross-encoder" and self.reranker_model_path is None:
            msg = "RERANKER=cross-encoder needs RERANKER_MODEL_PATH (a folder holding a saved CrossEncoder)"
            raise ValueError(msg)
        if self.reranker == "none" and self.reranker_model_path is not None:
            msg = "RERANKER_MODEL_PATH is set but RERANKER=none: set RERANKER=learned or cross-encoder, or unset it"
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _vocabulary_mode_needs_a_file(self) -> Settings:
        if self.query_vocabulary_mode == "replace" and self.query_vocabulary_path is None:
            msg = "QUERY_VOCABULARY_MODE=replace needs QUERY_VOCABULARY_PATH (the table that replaces the bundled one)"
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _flagd_file_needs_a_path(self) -> Settings:
        if (
            self.flags_provider == "openfeature"
            and self.flagd_resolver == "file"
            and not self.flagd_offline_flag_source_path
        ):
            msg = "FLAGD_RESOLVER=file needs FLAGD_OFFLINE_FLAG_SOURCE_PATH (a flagd flag definition file)"
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _forwarding_needs_an_own_identity(self) -> Settings:
        if self.opensearch_auth != "forward_jwt" or self.opensearch_url is None:
            return self
        basic = bool(self.opensearch_username and self.opensearch_password)
        if not basic and self.opensearch_service_token is None:
            msg = (
                "OPENSEARCH_AUTH=forward_jwt forwards callers' tokens on searches only; the service's own work "
                "(index creation, readiness, the outbox) needs OPENSEARCH_USERNAME and OPENSEARCH_PASSWORD "
                "or OPENSEARCH_SERVICE_TOKEN"
            )
            raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _auth_needs_a_key(self) -> Settings:
        keys = [self.jwt_secret, self.jwt_public_key_file, self.jwt_jwks_file]
        if self.auth_mode == "jwt" and not any(keys):
            msg = "AUTH_MODE=jwt needs JWT_SECRET, JWT_PUBLIC_KEY_FILE or JWT_JWKS_FILE"
            raise ValueError(msg)
        if self.auth_mode == "jwt" and sum(key is not None for key in keys) > 1:
            # Refused here (exit 2 before anything starts), not when the verifier is built after PostgreSQL.
            msg = "AUTH_MODE=jwt takes one of JWT_SECRET, JWT_PUBLIC_KEY_FILE and JWT_JWKS_FILE, not several"
            raise ValueError(msg)
        if self.jwt_secret is not None and len(self.jwt_secret.get_secret_value()) < 32:  # noqa: PLR2004 - RFC 7518 3.2: HS256 key >= 256 bits
            msg = "JWT_SECRET must be at least 32 characters"
            raise ValueError(msg)
        return self


def shared_database_problem(settings: Settings) -> str | None:
    """Why these settings cannot serve next to other processes, or None.

    An external `DATABASE_URL` is shared by every replica, while the embedded lexical index lives in
    one process's data folder: each replica's index would miss what another drained from the shared
    outbox, and a restarted one would answer the lexical leg from an empty index. That combination
    is refused; the embedded default (both unset) keeps PostgreSQL and the index in one data folder.
    """
    if settings.database_url is not None and settings.opensearch_url is None:
        return (
            "DATABASE_URL is set but OPENSEARCH_URL is not: every process would keep its own lexical index "
            "over the shared database; set OPENSEARCH_URL, or unset DATABASE_URL for the embedded default"
        )
    return None


def describe_validation_error(error: ValidationError) -> str:
    """One line naming each bad variable and why, e.g. `RRF_K_CONSTANT: Input should be ...`.

    A variable of several accepted forms (`LOG_JSON`: a boolean or `auto`) fails once per form; pydantic
    names each form after the variable (`LOG_JSON_BOOL`, `LOG_JSON_LITERAL['AUTO']`, variables that do not
    exist): the variable is named once, its forms' messages joined with "or".
    """
    messages: dict[str, list[str]] = {}
    for item in error.errors():
        variable = str(item["loc"][0]).upper() if item["loc"] else ""
        said = messages.setdefault(variable, [])
        if item["msg"] not in said:
            said.append(item["msg"])
    parts = [
        f"{variable}: {' or '.join(said)}" if variable else " or ".join(said) for variable, said in messages.items()
    ]
    return "invalid configuration: " + "; ".join(parts)


def load_settings() -> Settings:
    """Build settings from the environment, raising `ConfigurationError` with a one-line message."""
    try:
        return Settings()
    except ValidationError as error:
        raise ConfigurationError(describe_validation_error(error)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, built on first use."""
    return load_settings()
