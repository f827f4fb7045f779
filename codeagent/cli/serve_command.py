"""`codeagent serve` (click). The work is serve/commands.py's; the model, Starlette and uvicorn are imported
inside the command."""

from __future__ import annotations

import click


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
    from ..serve.commands import serve_model

    serve_model(model, adapter, host=host, port=port, name=name, max_tokens=max_tokens, device=device,
                threads=threads, max_request_mb=max_request_mb, max_connections=max_connections,
                allowed_hosts=allowed_hosts)
