"""Secrets out of everything envcheck captures, at the host seam: the value of every secret-named variable
wherever it appears, credentials inside URLs, and well-known token formats where no name warns of them."""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"

# Parts of a variable name that mark its value as a secret.
SECRET_NAME_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")

# Shorter secret-named values (XDG_SESSION_ID=3) are not searched for: every "3" would vanish.
MIN_SECRET_LENGTH = 8

# Userinfo in a URL (scheme://user:pass@host); the scheme is bounded so a long run of letters scans in linear time.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<userinfo>[^/?#@\s]+)@")
# Well-known token formats. The look-behind keeps ordinary words ("/opt/desk-environment") from matching.
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:(?:ghp_|gho_|ghs_|ghu_|github_pat_|glpat-|hf_|xox[abpr]-|sk-)[A-Za-z0-9_\-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}\b)"
)


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def redact_urls(text: str) -> str:
    """``text`` with URL credentials and token-shaped words replaced."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def redact_value(name: str, value: str) -> str:
    """``value`` of variable ``name`` as it may appear in a report: all of it redacted when the name marks a secret
    or a token format appears in it, else only the credentials inside URLs."""
    return REDACTED if is_secret_name(name) or _TOKEN_SHAPES.search(value) else redact_urls(value)


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Values of the secret-named variables worth searching for, longest first (a secret holding another goes whole)."""
    found = {value.strip() for name, value in environ.items() if is_secret_name(name) and isinstance(value, str)}
    return tuple(sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH and v != REDACTED), key=len, reverse=True))


class Redactor:
    """Removes the secrets of one environment from any text (see the module docstring)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        values = secret_values(environ)
        self._values = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def text(self, text: str) -> str:
        if not text:
            return text
        if self._values is not None:
            text = self._values.sub(REDACTED, text)
        return redact_urls(text)
