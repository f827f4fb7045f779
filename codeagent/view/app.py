"""The viewer's web app (Starlette). Local and read-only: every request must carry the token (`?token=`),
and its Host must name this server on loopback (127.0.0.1 or localhost, with its port; anything else is a
DNS-rebinding page): else 403. Pages run no script at all: the Content-Security-Policy allows none, and
styles only with the response's nonce. Every text a run holds is escaped (Jinja2 autoescape) and its
control characters shown (codeagent.visible)."""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from .. import patches
from ..trajectory import TrajectoryError, TrajectoryStore
from ..visible import visible
from . import data

TEMPLATES = Path(__file__).with_name("templates")
LOOPBACK = ("127.0.0.1", "localhost")


def host_allowed(host_header: str, port: int) -> bool:
    """The Host names this server: a loopback name with the port it listens on."""
    name, colon, given = host_header.strip().lower().rpartition(":")
    return bool(colon) and name in LOOPBACK and given == str(port)


def security_headers(nonce: str) -> list[tuple[bytes, bytes]]:
    policy = (f"default-src 'none'; style-src 'nonce-{nonce}'; form-action 'self'; "
              "base-uri 'none'; frame-ancestors 'none'")
    return [(b"content-security-policy", policy.encode()), (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"), (b"cache-control", b"no-store")]


class Guard:
    """ASGI middleware: the token and Host checks, a nonce per request, the security headers on every answer."""

    def __init__(self, app, token: str):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        nonce = secrets.token_urlsafe(16)
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        port = (scope.get("server") or ("", 0))[1]
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
        refusal = None
        if not host_allowed(host, port):
            refusal = (f"refused: Host {host[:100]!r} does not name this server (DNS rebinding?); "
                       f"open http://127.0.0.1:{port}/ with its token")
        elif not hmac.compare_digest(given.encode(), self.token.encode()):
            refusal = "refused: this page needs its token (the URL `codeagent view` printed)"

        async def send_secured(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *security_headers(nonce)]}
            await send(message)

        if refusal:
            return await PlainTextResponse(refusal, status_code=403)(scope, receive, send_secured)
        scope.setdefault("state", {})["nonce"] = nonce
        return await self.app(scope, receive, send_secured)


def _finalize(value: Any) -> Any:
    """Every value a template prints: shown (control characters, bidi overrides, lone surrogates made
    visible), then escaped by autoescape."""
    if value is None:
        return ""
    return visible(value) if isinstance(value, str) else value


def json_response(payload: Any, status: int = 200) -> Response:
    # ASCII JSON: a patch's undecodable bytes are lone surrogates, which UTF-8 cannot carry (\udcXX here)
    return Response(json.dumps(payload, ensure_ascii=True, default=str), status_code=status,
                    media_type="application/json")


def create_app(store_dir: str | Path | None, token: str, evals: Sequence[Path] = (), training: Sequence[Path] = ()) -> Guard:
    store = TrajectoryStore(store_dir)
    evals, training = [Path(p) for p in evals], [Path(p) for p in training]
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, finalize=_finalize,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)

    def link(path: str, **params: Any) -> str:
        query = {"token": token, **{k: v for k, v in params.items() if v not in (None, "")}}
        return path + "?" + urlencode(query)

    env.globals.update(link=link, quote=lambda text: quote(str(text), safe=""), fmt=_fmt, usd=_usd,
                       evals=[str(p) for p in evals], trainings=[str(p) for p in training])
    templates = Jinja2Templates(env=env)

    def page(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(request, name, {"nonce": request.state.nonce, "token": token, **context},
                                          status_code=status)

    def failure(request: Request, status: int, message: str) -> Response:
        if request.url.path.startswith("/api/"):
            return json_response({"error": message}, status)
        return page(request, "error.html", status, message=message)

    def load(request: Request):
        try:
            return store.load(request.path_params["run_id"])
        except TrajectoryError as error:
            return failure(request, 404, str(error))

    def runs_page(request: Request) -> Response:
        try:
            query = data.RunQuery.from_params(request.query_params)
        except data.QueryError as error:
            return failure(request, 400, str(error))
        return page(request, "runs.html", runs=data.list_runs(store, query), query=query,
                    store=str(store.root))

    def run_page(request: Request) -> Response:
        trajectory = load(request)
        if isinstance(trajectory, Response):
            return trajectory
        return page(request, "run.html", run=data.summary(trajectory), trajectory=trajectory,
                    timeline=data.timeline(trajectory), diff=data.diff_lines(trajectory.patch),
                    integrity=trajectory.integrity_flags)

    def group_page(request: Request) -> Response:
        group_id = request.path_params["group_id"]
        rows = data.candidates(store, group_id)
        if not rows:
            return failure(request, 404, f"no runs in group {group_id!r}")
        return page(request, "group.html", group_id=group_id, candidates=rows)

    def folder(request: Request, folders: list[Path]) -> Path | Response:
        number = request.path_params["number"]
        if number >= len(folders):
            return failure(request, 404, f"no folder #{number}")
        return folders[number]

    def eval_page(request: Request) -> Response:
        where = folder(request, evals)
        if isinstance(where, Response):
            return where
        try:
            report = data.eval_report(where)
        except OSError as error:
            return failure(request, 404, str(error))
        if request.url.path.startswith("/api/"):
            return json_response(report)
        return page(request, "eval.html", report=report)

    def training_page(request: Request) -> Response:
        where = folder(request, training)
        if isinstance(where, Response):
            return where
        try:
            curves = data.training_curves(where)
        except OSError as error:
            return failure(request, 404, str(error))
        if request.url.path.startswith("/api/"):
            return json_response(curves)
        return page(request, "training.html", report=curves)

    def api_runs(request: Request) -> Response:
        try:
            query = data.RunQuery.from_params(request.query_params)
        except data.QueryError as error:
            return failure(request, 400, str(error))
        return json_response({"runs": data.list_runs(store, query)})

    def api_run(request: Request) -> Response:
        trajectory = load(request)
        if isinstance(trajectory, Response):
            return trajectory
        return json_response(trajectory.model_dump(mode="json"))

    def api_patch(request: Request) -> Response:
        trajectory = load(request)
        if isinstance(trajectory, Response):
            return trajectory
        return Response(patches.encode(trajectory.patch or ""), media_type="text/plain; charset=utf-8")

    app = Starlette(routes=[
        Route("/", runs_page),
        Route("/runs/{run_id}", run_page),
        Route("/groups/{group_id:path}", group_page),
        Route("/evals/{number:int}", eval_page),
        Route("/training/{number:int}", training_page),
        Route("/api/runs", api_runs),
        Route("/api/runs/{run_id}", api_run),
        Route("/api/runs/{run_id}/patch", api_patch),
        Route("/api/evals/{number:int}", eval_page),
        Route("/api/training/{number:int}", training_page),
    ])
    return Guard(app, token)


def _usd(value: Any) -> str:
    """A cost, in US dollars as the providers price it ("-": not known)."""
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"${value:.4f}"


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)
