"""The one error tree. Adapters translate driver errors into it; `app/api/errors.py` maps it to HTTP."""

from __future__ import annotations


class SearchServiceError(Exception):
    """Root of every error this service raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(SearchServiceError):
    """The caller sent something we cannot act on; `field` names the offending input.

    `document_id` names the document of an ingest batch whose `field` it is (the API turns the two into
    the item's path in the body, `documents[2].tags`).
    """

    def __init__(self, message: str, *, field: str | None = None, document_id: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.document_id = document_id

    def of_item(self, index: int, *, list_field: str) -> InvalidInputError:
        """This refusal as one of item `index` of a request's list (`queries[2]`): its field and words start with it."""
        path = f"{list_field}[{index}]"
        field = f"{path}.{self.field}" if self.field else path
        return type(self)(f"{path}: {self.message}", field=field, document_id=self.document_id)


class InvalidQueryError(InvalidInputError):
    """A search request that cannot be run as given."""


class DocumentTooLargeError(InvalidInputError):
    """A document over the configured size limit."""


class DocumentNotFoundError(SearchServiceError):
    """No such document in that project."""


class VersionConflictError(SearchServiceError):
    """A write named the document version it expected, and the stored one differs (nothing was written).

    `current_version` is the stored version, None when the document does not exist.
    """

    def __init__(self, message: str, *, document_id: str, current_version: int | None) -> None:
        super().__init__(message)
        self.document_id = document_id
        self.current_version = current_version

    @classmethod
    def changed_since_read(
        cls, document_id: str, *, read_version: int, current_version: int | None
    ) -> VersionConflictError:
        """A conditional write's document changed between its check and its save (a delete by selection ran)."""
        shown = "does not exist" if current_version is None else f"is at version {current_version}"
        read = "absent" if read_version == 0 else f"at version {read_version}"
        msg = f"document {document_id!r} {shown}: deleted or changed since the write found it {read}; nothing written"
        return cls(msg, document_id=document_id, current_version=current_version)


class RateLimitedError(SearchServiceError):
    """The caller sent more requests than its rate allows; `retry_after_s` says when to come back.

    `refusal` is the request's own refusal (`AuthenticationError`, `PermissionDeniedError`) when it is a
    refused authentication from an address past its limit: sending it again as it is cannot succeed.
    """

    def __init__(self, message: str, *, retry_after_s: int, refusal: SearchServiceError | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.refusal = refusal


class IngestionError(SearchServiceError):
    """A document could not be stored; nothing of it was written."""


class EngineError(SearchServiceError):
    """An engine (vector store, lexical index, embedder) failed; `engine` is its adapter name."""

    def __init__(self, message: str, *, engine: str) -> None:
        super().__init__(message)
        self.engine = engine


class EngineUnavailableError(EngineError):
    """The engine could not be reached or refused the call."""


class EngineRejectedError(EngineUnavailableError):
    """The engine answered and refused this request as sent (a document it cannot take, an index in the way).

    Sent again it fails again; other requests may pass. The outbox indexes a batch's other documents
    and leaves the refused ones queued (`app.ingestion.outbox`).
    """


class EngineTimeoutError(EngineError):
    """The engine did not answer within its deadline."""


class EngineStorageFullError(EngineError):
    """The engine has no space left to write (PostgreSQL's disk is full): a retry in a second does not help."""


class AllEnginesFailedError(SearchServiceError):
    """Every leg a plan needed failed, so there is nothing to return."""

    def __init__(self, message: str, *, reasons: tuple[str, ...]) -> None:
        super().__init__(message)
        self.reasons = reasons


class AuthenticationError(SearchServiceError):
    """No valid credentials: missing, malformed, expired or wrongly signed token."""


class PermissionDeniedError(SearchServiceError):
    """Valid credentials that do not grant this project or scope."""
