"""Who is asking: one dependency every route declares, and the checks of a browser's form posts.

A script presents its token (`Authorization: Bearer T`); a browser signs in once with the token in
a form post and then carries a session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS), never
the token. A form post of a session must carry the page's CSRF token (tokens.Roster.csrf) and,
where the browser names its Origin (every current browser does on a post), come from this server:
a form on another site can do neither. A token is never put in an address or a log.
"""

from __future__ import annotations

import time

from fastapi import Depends, HTTPException, Request

from grader.service.tokens import Identity

COOKIE = "grader_session"


def identify(request: Request) -> Identity | None:
    """The identity of a bearer token or of a session cookie; None for anyone else."""
    roster = request.app.state.service.roster
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return roster.who(token)
    return roster.from_session(request.cookies.get(COOKIE), time.time())


def signed_in(identity: Identity | None = Depends(identify)) -> Identity:
    """For the API's own list: 401 to anyone without a valid token or session."""
    if identity is None:
        raise HTTPException(401, "sign in: send your token as `Authorization: Bearer TOKEN`",
                            headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
    return identity


def staff(identity: Identity | None = Depends(identify)) -> Identity:
    """The TA's pages are not there for anyone else (404, as any address they may not read)."""
    if identity is None or not identity.staff:
        raise HTTPException(404, "not found")
    return identity


def from_this_site(request: Request) -> None:
    """A post whose browser names another Origin is refused (403)."""
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin is not None and origin != own:
        raise HTTPException(403, "a form posted from another site is refused")


async def form_of_session(request: Request, identity: Identity | None = Depends(identify)) -> Identity:
    """A signed-in browser's form post: from this site, with this session's CSRF token."""
    from_this_site(request)
    form = await request.form()  # Starlette keeps it: the route reads the same form
    session = request.cookies.get(COOKIE)
    roster = request.app.state.service.roster
    if identity is None or request.headers.get("authorization") or not roster.csrf_holds(session, form.get("csrf")):
        raise HTTPException(403, "this form has expired or did not come from this site: reload the page and try again")
    return identity
