"""The exceptions the hand-written layer raises."""

from __future__ import annotations

import json
from typing import Any


class QuarryError(Exception):
    """An error answered by quarry (any non-2xx response), or a job that did not complete.

    ``status`` is the HTTP status (``None`` for a job that ended badly), ``code`` quarry's
    stable error code (``world_not_found``, ``invalid_retrieval_settings``, ...; see
    ``quarry.generated.models.ErrorCode``), ``message`` its human-readable explanation and
    ``details`` the extra facts it gave (``{"field": "top_k"}``), if any.
    """

    def __init__(
        self,
        status: int | None,
        code: str | None,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"HTTP {self.status}" if self.status is not None else "quarry"
        return f"{where} {self.code or 'error'}: {self.message}"

    def __reduce__(self):  # keeps the fields through pickling (multiprocessing, caches)
        return (type(self), (self.status, self.code, self.message, self.details))

    @classmethod
    def from_response(cls, status: int, content: bytes) -> QuarryError:
        """Reads quarry's error body (``{"error": {"code", "message", "details"?}}``); a body
        of another shape (a proxy's page, an empty body) keeps its text as the message."""
        text = content.decode("utf-8", errors="replace")
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            details = error.get("details")
            return cls(
                status,
                error.get("code") if isinstance(error.get("code"), str) else None,
                error["message"],
                details if isinstance(details, dict) else None,
            )
        return cls(status, None, text.strip() or f"HTTP {status} without a body")


class QuarryJobError(QuarryError):
    """A job this client followed ended ``failed`` or ``cancelled``. ``job`` is its last state
    (``quarry.generated.models.Job``); ``code`` is ``job_failed`` or ``job_cancelled`` and
    ``details`` holds the first chunk errors the job reported."""

    def __init__(self, job: Any) -> None:
        self.job = job
        status = str(job.status.value if hasattr(job.status, "value") else job.status)
        errors = [
            {
                "code": e.code,
                "message": e.message,
                "book_number": e.book_number,
                "chunk_number": e.chunk_number,
            }
            for e in (job.errors or [])[:5]
        ]
        first = f"; first error: {errors[0]['code']}: {errors[0]['message']}" if errors else ""
        super().__init__(
            None,
            f"job_{status}",
            f"job {job.id} ({job.kind}) ended {status}: {job.counts.failed} of {job.counts.total} chunks failed{first}",
            {"job_id": str(job.id), "errors": errors},
        )

    def __reduce__(self):
        return (type(self), (self.job,))
