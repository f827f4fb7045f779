"""Secrets hidden before a config is recorded in a trajectory: the values of flags, variables, headers and
URL parts whose names say they carry one; the names are kept."""

from __future__ import annotations

import re

HIDDEN = "<hidden>"
# A flag, query key or NAME=value whose name says it carries a secret.
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|credential|bearer|session|signature|sig$", re.I)


def hide_secret_args(args: list[str]) -> list[str]:
    """`--api-key X`, `--token=X`, `-e GITHUB_TOKEN=X`, `--header "Authorization: Bearer X"`, a URL's
    password or token: the value is hidden, the name kept."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(HIDDEN)
            hide_next = False
            continue
        name, equals, value = arg.partition("=")
        header, colon, _ = arg.partition(":")
        if equals and "://" not in name and _SECRET_NAME.search(name):
            out.append(f"{name}={HIDDEN}")
        elif equals and "://" not in name and "://" in value:
            out.append(f"{name}={hide_secret_url(value)}")
        elif "://" in arg:
            out.append(hide_secret_url(arg))
        elif colon and re.fullmatch(r"[\w-]+", header) and _SECRET_NAME.search(header):
            out.append(f"{header}: {HIDDEN}")
        else:
            out.append(arg)
            hide_next = arg.startswith("-") and bool(_SECRET_NAME.search(arg))
    return out


def hide_secret_url(url: str) -> str:
    """user:password@ and the values of query keys that name a secret (api_key, token, ...) are hidden."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return HIDDEN  # not a URL we can take apart: keep none of it
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if port is not None:
        netloc = f"{netloc}:{port}"
    if parts.username is not None:
        userinfo = HIDDEN if parts.password is None else f"{parts.username}:{HIDDEN}"
        netloc = f"{userinfo}@{netloc}"
    query = urlencode([(key, HIDDEN if _SECRET_NAME.search(key) else value)
                       for key, value in parse_qsl(parts.query, keep_blank_values=True)], safe="<>")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))  # a fragment can carry a token too
