"""`codeagent serve` (click; the model, Starlette and uvicorn are imported inside the command)."""

from __future__ import annotations

import sys

import click

EXIT_USER_ERROR = 3  # as the rest of the CLI: a problem the user can fix, said in one line


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USER_ERROR)


@click.command("serve")
@click.option("--model", "model", required=True, help="A model directory or hub id, or an adapter directory.")
@click.option("--adapter", default=None, help="A PEFT adapter directory to apply to --model.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--name", default="codeagent", show_default=True, help="The model name clients use.")
@click.option("--max-tokens", default=1024, show_default=True, type=click.IntRange(min=1),
              help="Default and largest reply (tokens).")
@click.option("--device", default=None, help="torch device (default: cuda if available, else cpu).")
@click.option("--threads", default=None, type=int, help="torch CPU threads.")
@click.option("--max-request-mb", default=4.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Largest request body (MiB); larger ones get 413.")
@click.option("--max-connections", default=8, show_default=True, type=click.IntRange(min=1),
              help="Connections served at once; more get 503.")
@click.option("--allow-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Another name clients reach this server by (the Host header; default: loopback names and --host).")
def serve(model: str, adapter: str | None, host: str, port: int, name: str, max_tokens: int,
          device: str | None, threads: int | None, max_request_mb: float, max_connections: int,
          allowed_hosts: tuple[str, ...]) -> None:
    """Serve a model (with its adapter) over an OpenAI-compatible chat API with tool calling."""
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


def main() -> None:
    """`python -m codeagent.serve.commands serve ...`, the command without the rest of the CLI."""
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    root = click.Group(commands={"serve": serve})
    root(prog_name="codeagent")


if __name__ == "__main__":
    main()
