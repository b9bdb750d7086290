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
MIN_PREFIX_LEN = 8
"""A secret cut short (an echo without its last characters) is masked from this many of its
first characters on; a shorter secret is masked only whole."""
_ENCODED_PREFIXES = ("", "Bearer ", "Authorization: Bearer ")
"""Texts a client sends a key in, whose base64 a server may echo (Basic auth is ``user:pass``,
registered from the URL)."""


_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)[^/\s@?#]+@")
"""The scheme's length is bounded: unbounded, a long run of letters (a model's padded answer) made
the search quadratic (1 MB: hours)."""
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
    """Redact ``value`` from everything the plugin writes, for the rest of the process: the value,
    any prefix of it of at least `MIN_PREFIX_LEN` characters, and its base64 (standard and
    URL-safe) inside any base64 text, e.g. of ``Authorization: Bearer <value>``."""
    if value and len(value) >= MIN_SECRET_LEN:
        encoded = {core for prefix in _ENCODED_PREFIXES for core in _base64_cores(prefix + value)
                   if len(core) >= MIN_PREFIX_LEN}
        with _lock:
            _secrets.add(value)
            _secrets.update(encoded)


def _base64_cores(text: str) -> set[str]:
    """The base64 characters that encode ``text`` whatever its offset in the encoded bytes: for
    each of the three alignments, the 4-character groups made of ``text``'s bytes alone."""
    data = text.encode("utf-8", "surrogatepass")
    cores = set()
    for offset in range(3):
        padded = b"\0" * offset + data
        whole_groups = len(padded) // 3
        first = 1 if offset else 0  # the first group mixes in bytes before the text
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            cores.add(encode(padded)[first * 4: whole_groups * 4].decode("ascii"))
    return cores


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
        text = _mask(text, secret)
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)
    text = _QUERY_SECRET.sub(lambda m: m.group("name") + MASK, text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group("name") + MASK, text)


def _mask(text: str, secret: str) -> str:
    """``text`` with ``secret`` masked, and any run of its first `MIN_PREFIX_LEN` or more
    characters (a key echoed cut short)."""
    if len(secret) < MIN_PREFIX_LEN:
        return text.replace(secret, MASK)
    head = secret[:MIN_PREFIX_LEN]
    start = text.find(head)
    while start != -1:
        end = start + MIN_PREFIX_LEN
        while end - start < len(secret) and end < len(text) and text[end] == secret[end - start]:
            end += 1
        text = text[:start] + MASK + text[end:]
        start = text.find(head, start + len(MASK))
    return text


def redact_strings(value: Any) -> Any:
    """Every string in ``value`` (dicts, lists: a report entry) redacted; the rest as it is."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_strings(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_strings(item) for item in value]
    return value


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
    "MASK", "install_log_redaction", "redact", "redact_strings", "register_environment_secrets",
    "register_secret", "register_url_secrets",
]
