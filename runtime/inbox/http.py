"""The HTTP adapter: an inbox served by ``interlock inbox serve`` elsewhere, through httpx.

Every request has a timeout (``timeout`` seconds for connecting, reading and writing),
so an unresponsive server raises InboxUnavailable instead of hanging the caller. Errors
the server reports come back as the same InboxError kinds the store raised there.
"""

from __future__ import annotations

import builtins
from typing import Any

import httpx

from interlock.runtime.inbox.base import DEFAULT_LEASE, DEFAULT_TIMEOUT
from interlock.runtime.inbox.model import (
    ERRORS,
    Claim,
    InboxUnavailable,
    Message,
    MessageLease,
    Status,
    StatusChange,
    check_id,
)


class HttpInbox:
    """An inbox at ``base_url`` (``http://host:port``)."""

    def __init__(self, base_url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._client = httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(timeout))

    def __repr__(self) -> str:
        return f"HttpInbox({self.base_url!r})"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None) -> Any:
        try:
            response = self._client.request(method, path, json=body, params=params)
        except httpx.TimeoutException:
            raise InboxUnavailable(f"the inbox at {self.base_url} did not answer within "
                                   f"{self.timeout:g} s ({method} {path})") from None
        except httpx.HTTPError as exc:
            raise InboxUnavailable(f"cannot reach the inbox at {self.base_url}: "
                                   f"{exc or type(exc).__name__}") from None
        try:
            data = response.json()
        except ValueError:
            raise InboxUnavailable(f"the inbox at {self.base_url} answered {method} {path} "
                                   f"with HTTP {response.status_code} and no JSON") from None
        if response.is_success:
            return data
        kind = data.get("error") if isinstance(data, dict) else None
        message = data.get("message") if isinstance(data, dict) else None
        error = ERRORS.get(kind or "", InboxUnavailable)
        raise error(message or f"the inbox at {self.base_url} answered HTTP "
                    f"{response.status_code}")

    def post(self, type: str, sender: str, body: str = "", *,
             correlation_id: str | None = None, payload_ref: str | None = None) -> str:
        data = self._call("POST", "/messages", {
            "type": type, "from": sender, "body": body, "correlation_id": correlation_id,
            "payload_ref": payload_ref})
        return str(data["id"])

    def get(self, message_id: str) -> Message:
        return Message.from_json(self._call("GET", f"/messages/{check_id(message_id)}"))

    def list(self, status: Status | None = None, limit: int = 1000) -> builtins.list[Message]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = str(status)
        return [Message.from_json(m) for m in self._call("GET", "/messages", params=params)]

    def fetch_queued(self, limit: int = 100) -> builtins.list[Message]:
        return [Message.from_json(m) for m in self._call("POST", "/fetch", {"limit": limit})]

    def claim(self, message_id: str, owner: str,
              lease_seconds: float = DEFAULT_LEASE) -> MessageLease | None:
        data = self._call("POST", f"/messages/{check_id(message_id)}/claim",
                          {"owner": owner, "lease_seconds": lease_seconds})
        return None if data is None else MessageLease(data["token"], data["lease_until"])

    def claim_next(self, owner: str, lease_seconds: float = DEFAULT_LEASE,
                   limit: int = 1) -> builtins.list[Claim]:
        data = self._call("POST", "/claim", {"owner": owner, "lease_seconds": lease_seconds,
                                             "limit": limit})
        return [Claim(Message.from_json(c["message"]), MessageLease(c["token"], c["lease_until"]))
                for c in data]

    def update_status(self, message_id: str, status: Status, token: str | None = None, *,
                      reason: str | None = None) -> Message:
        return Message.from_json(self._call(
            "POST", f"/messages/{check_id(message_id)}/status",
            {"status": str(status), "token": token, "reason": reason}))

    def reclaim_expired(self) -> int:
        return int(self._call("POST", "/reclaim", {})["reclaimed"])

    def journal(self, message_id: str) -> builtins.list[StatusChange]:
        return [StatusChange.from_json(e) for e in
                self._call("GET", f"/messages/{check_id(message_id)}/journal")]

    def settings(self) -> dict[str, Any]:
        return dict(self._call("GET", "/settings"))

    def set_setting(self, key: str, value: Any) -> None:
        self._call("PUT", f"/settings/{key}", {"value": value})

    def close(self) -> None:
        self._client.close()
