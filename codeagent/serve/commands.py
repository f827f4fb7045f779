"""The work of `codeagent serve` (its click definition: cli/serve_command.py). The model, Starlette and
uvicorn are imported inside the function."""

from __future__ import annotations

import sys

import click

EXIT_USER_ERROR = 3  # as the rest of the CLI: a problem the user can fix, said in one line


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USER_ERROR)


def serve_model(model: str, adapter: str | None, *, host: str, port: int, name: str, max_tokens: int,
                device: str | None, threads: int | None, max_request_mb: float, max_connections: int,
                allowed_hosts: tuple[str, ...]) -> None:
    """Load the model (and adapter) and serve it in the foreground until Ctrl-C; exit 3 with the reason when
    it cannot load or listen."""
    import importlib.util

    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("starlette") is None:
        _fail("the server needs Starlette and uvicorn: pip install 'codeagent[train]'")
    from ..interrupts import forget_handled_interrupt
    from ..models.errors import ModelConfigError
    from .server import Server, load_served_model

    try:
        loaded = load_served_model(model, adapter, max_new_tokens=max_tokens, device=device, threads=threads)
        server = Server(loaded, name=name, host=host, port=port, max_body_bytes=int(max_request_mb * (1 << 20)),
                        max_connections=max_connections, allowed_hosts=allowed_hosts)
    except ModelConfigError as error:
        _fail(str(error))
        return
    except OSError as error:
        _fail(f"cannot listen on {host}:{port}: {error}")
        return
    click.echo(f"serving {loaded.name} as {name!r} at {server.url}", err=True)
    click.echo(f"use it: codeagent solve --model hosted_vllm/{name} --api-base {server.url} ...", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        forget_handled_interrupt()
    finally:
        server.stop()
