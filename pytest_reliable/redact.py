"""Secrets never leave the plugin: the configured API keys and URL credentials are redacted at
the source, from every exception text the adapters and the runner produce, from the header's
model label and from log records.

A server may echo the key it received in a 403 or 500 body, and a base URL may carry a password
(``http://user:sk-KEY@host/v1``) or a key in its query (``?api-key=...``). Keys are registered by
the adapter that holds them (`register_secret`); URL credentials are recognised by their shape. A
PostgreSQL store registers its URL's password and ``PGPASSWORD`` the moment it is named.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
MIN_SECRET_LEN = 6
"""Shorter strings are not registered: masking them would mangle ordinary text."""


_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#]+@")
_QUERY_SECRET = re.compile(
    r"(?P<name>[?&](?:api[-_]?key|key|token|access[-_]?token|secret|password|auth|sig)=)"
    r"[^&\s#'\"]+",
    re.IGNORECASE,
)

_KEYWORD_PASSWORD = re.compile(
    r"(?P<name>\b(?:PG)?PASSWORD\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^\s&'\"]+)",
    re.IGNORECASE,
)
"""A password in libpq's keyword form (``host=h password=pw``) or an environment assignment
(``PGPASSWORD=pw``): the shapes a PostgreSQL store's settings take besides a URL."""

_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str | None) -> None:
    """Redact ``value`` from everything the plugin writes, for the rest of the process."""
    if value and len(value) >= MIN_SECRET_LEN:
        with _lock:
            _secrets.add(value)


def register_url_secrets(url: str | None) -> None:
    """Register the password of ``url``'s credentials (raw and as the Basic auth header a
    client sends for them) and the values of its secret-looking query parameters."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.password:
        userinfo = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
        register_secret(unquote(parts.password))
        register_secret(base64.b64encode(userinfo.encode()).decode())
    for name, value in parse_qsl(parts.query):
        if _QUERY_SECRET.match(f"?{name}={value}"):
            register_secret(value)


def register_environment_secrets(*names: str) -> None:
    """Register the values of the environment variables ``names`` (e.g. ``PGPASSWORD``)."""
    for name in names:
        register_secret(os.environ.get(name))


def redact(text: str) -> str:
    """``text`` without registered secrets, URL passwords, secret query parameters and
    ``password=`` settings."""
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    text = _QUERY_SECRET.sub(lambda m: m.group("name") + MASK, text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group("name") + MASK, text)


def _redact_record(record: logging.LogRecord) -> None:
    message = record.getMessage()
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)


_installed = False


def install_log_redaction() -> None:
    """Redact every log record when it is made (idempotent).

    A logger's filter does not see its children's records and the HTTP libraries log under
    names of their own (the request URL, with its credentials, at INFO), so the record factory
    does it, for every logger: only secrets and URL credentials are ever changed.
    """
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(factory)


__all__ = [
    "MASK", "install_log_redaction", "redact", "register_environment_secrets", "register_secret",
    "register_url_secrets",
]
