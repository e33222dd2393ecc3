"""The room a presenter shows the page to: the address people can open it at, and how many have.

A workshop joins by scanning a QR code on the screen, so the page needs an address that works from
the visitors' phones: the Space's own host (SPACE_HOST, set on a Hugging Face Space), the public
link of `--share`, or the address the presenter's own browser used when it is not this machine's
loopback (a server on a LAN, `--host 0.0.0.0`). A loopback address is no use to anyone else: then
there is none, and the page says how to get one.
"""
from __future__ import annotations

import ipaddress
import threading
from typing import Mapping
from urllib.parse import urlsplit

LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def public_address(space_host: str | None, share_url: str | None, page_url: str | None) -> str | None:
    """The address visitors can open the page at, or None when it is only served on this machine.

    space_host: SPACE_HOST on a Space ("owner-name.hf.space"); share_url: the `--share` link;
    page_url: the address the presenter's browser used (the request's base URL).
    """
    if space_host and space_host.strip():
        host = space_host.strip().removeprefix("https://").removeprefix("http://").rstrip("/")
        return f"https://{host}"
    if share_url and share_url.strip():
        return share_url.strip().rstrip("/")
    if page_url and not is_loopback(page_url):
        parts = urlsplit(page_url)
        return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
    return None


def page_url(headers: Mapping[str, str]) -> str | None:
    """The address a browser asked for the page at, from its request's headers (a proxy's first)."""
    host = headers.get("x-forwarded-host") or headers.get("host")
    return f"{headers.get('x-forwarded-proto') or 'http'}://{host}" if host else None


def is_loopback(url: str) -> bool:
    """Whether `url` points at this machine only (localhost, 127.0.0.0/8, ::1, or the unspecified 0.0.0.0)."""
    host = urlsplit(url).hostname or ""
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def short_link(url: str) -> str:
    """The address as a person types it: no scheme, no trailing slash."""
    return url.split("://", 1)[-1].rstrip("/")


class Audience:
    """The browser sessions that have the page open: a page that loads arrives, a closed tab leaves."""

    def __init__(self):
        self._sessions: set[str] = set()
        self._lock = threading.Lock()

    def arrive(self, session: str) -> int:
        """Count `session` in; returns how many are watching now."""
        with self._lock:
            if session:
                self._sessions.add(session)
            return len(self._sessions)

    def leave(self, session: str) -> int:
        """Count `session` out (a closed tab); returns how many are watching now."""
        with self._lock:
            self._sessions.discard(session)
            return len(self._sessions)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
