"""Each student's token and each browser's session, derived from the course's secret (its salt).

A token is an HMAC of the student's name keyed by the salt, under a purpose of its own, so it is
neither the student's leaderboard pseudonym (an HMAC of the bare name) nor anything one can work
out without the salt; `tokens` prints them to hand out, and nothing stores them: the server keeps
only their SHA-256, to look a presented token up. A session (the web page's cookie) is the
student's name and the time it was signed in, with an HMAC under another purpose; the form
posts of a session carry a CSRF token, an HMAC of the session. Changing the salt changes every
token and ends every session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

SESSION_HOURS = 12  # a browser's sign-in lasts a working day
TOKEN = b"kernel-grader service token\0"
SESSION = b"kernel-grader service session\0"
CSRF = b"kernel-grader service form\0"


@dataclass(frozen=True)
class Identity:
    name: str
    staff: bool = False  # a TA: sees every submission and the class page

    def may_read(self, owner: str) -> bool:
        return self.staff or owner == self.name


def _mac(secret: str, purpose: bytes, text: str) -> bytes:
    return hmac.new(secret.encode(), purpose + text.encode(), hashlib.sha256).digest()


def token_for(secret: str, name: str) -> str:
    """The token of `name`: 160 bits of the HMAC, in lower-case base32 (32 characters, easy to paste)."""
    return base64.b32encode(_mac(secret, TOKEN, name)[:20]).decode().lower()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.strip().encode()).digest()


class Roster:
    """Who may use the service, found by their token."""

    def __init__(self, secret: str, students: tuple[str, ...], staff: tuple[str, ...] = ()):
        self.secret = secret
        self.by_digest = {_digest(token_for(secret, name)): Identity(name) for name in students}
        self.by_digest |= {_digest(token_for(secret, name)): Identity(name, staff=True) for name in staff}
        self.by_name = {identity.name: identity for identity in self.by_digest.values()}

    def who(self, token: str | None) -> Identity | None:
        return self.by_digest.get(_digest(token)) if token else None

    def session(self, identity: Identity, now: float) -> str:
        """A cookie's value: the name, when it was signed in, and their HMAC."""
        body = f"{identity.name.encode().hex()}.{int(now)}"  # hex: a cookie value needs no quoting
        return f"{body}.{_mac(self.secret, SESSION, body).hex()}"

    def from_session(self, value: str | None, now: float) -> Identity | None:
        """The identity a cookie names, if its HMAC holds, it has not expired and the name is still listed."""
        try:
            encoded, issued, mac = (value or "").split(".")
            name = bytes.fromhex(encoded).decode()
            fresh = 0 <= now - int(issued) <= SESSION_HOURS * 3600
        except ValueError:
            return None
        good = hmac.compare_digest(mac, _mac(self.secret, SESSION, f"{encoded}.{issued}").hex())
        return self.by_name.get(name) if good and fresh else None

    def csrf(self, session: str) -> str:
        """The token a form of this session carries: another site cannot read it, so cannot forge a post."""
        return _mac(self.secret, CSRF, session).hex()[:32]

    def csrf_holds(self, session: str | None, presented: str | None) -> bool:
        return bool(session and presented) and hmac.compare_digest(self.csrf(session), presented)
