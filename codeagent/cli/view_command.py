"""`codeagent view` (click; the web app, view/app.py, Starlette and uvicorn are imported inside the command)."""

from __future__ import annotations

import click


@click.command("view")
@click.option("--store", "store_dir", type=click.Path(file_okay=False), envvar="CODEAGENT_TRAJECTORY_DIR",
              help="Trajectory directory [default: ~/.codeagent/trajectories].")
@click.option("--evals", "evals", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="An eval output folder (codeagent eval ... OUTPUT) to report on. Repeatable.")
@click.option("--training", "training", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="A training output folder (its metrics.jsonl: reward, KL, mismatch curves). Repeatable.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="The port on 127.0.0.1 (0: a free one).")
def view_command(store_dir, evals, training, port) -> None:
    """A local web page over your runs, eval reports and training curves (127.0.0.1 only; the URL it
    prints carries a token that every request needs)."""
    import secrets
    import socket
    import sys
    from pathlib import Path

    try:
        import uvicorn
    except ImportError:
        raise click.ClickException("the viewer needs Starlette and uvicorn: pip install 'codeagent[view]'") from None

    from ..view.app import create_app

    token = secrets.token_urlsafe(24)
    app = create_app(store_dir, token, [Path(p) for p in evals], [Path(p) for p in training])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(128)  # connections made as soon as the URL is out wait for the server
    except OSError as error:
        raise click.ClickException(f"cannot listen on 127.0.0.1:{port}: {error.strerror or error}") from None
    bound = sock.getsockname()[1]
    click.echo(f"http://127.0.0.1:{bound}/?token={token}")
    click.echo("codeagent view: open the URL above (Ctrl-C stops it)", err=True)
    sys.stdout.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, server_header=False,
                                           proxy_headers=False))
    server.run(sockets=[sock])
