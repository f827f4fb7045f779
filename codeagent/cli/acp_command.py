"""`codeagent acp` (click; the ACP server, acp/server.py, and the session are imported inside the command)."""

from __future__ import annotations

import click


@click.command("acp")
@click.option("--model", "model_name", type=str, help="litellm model id, or replay:TRAJECTORY.")
@click.option("--api-base", type=str, help="Base URL of an OpenAI-compatible server (vLLM, ollama...).")
@click.option("--approval-mode", type=click.Choice(["suggest", "auto-edit", "full-auto"]), default="suggest",
              show_default=True, help="Ask the editor before commands and edits, before commands only, or never.")
@click.option("--sandbox", "sandbox_kind", type=click.Choice(["docker", "local"]), help="local: NO isolation.")
@click.option("--config", "config_file", type=str, help="A config file (YAML), over the user and project ones.")
@click.option("--trust", is_flag=True, help="Trust the repositories' .codeagent.yaml (untrusted, only harmless "
              "settings apply).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Override a setting, e.g. limits.max_steps=20.")
def acp_command(model_name, api_base, approval_mode, sandbox_kind, config_file, trust, settings) -> None:
    """Speak the Agent Client Protocol on stdin/stdout, for an editor (Zed...). Each editor session runs
    the agent on its folder in a sandbox, as `solve` does; edits reach your files only through the editor
    (fs/write_text_file, when it can), never written by codeagent itself."""
    import asyncio

    from ..config import ConfigError, flag_overrides

    try:
        import acp  # noqa: F401
    except ImportError:
        raise click.ClickException("`codeagent acp` needs the ACP package: pip install 'codeagent[acp]'") from None
    try:
        overrides = flag_overrides(list(settings), model__name=model_name, model__api_base=api_base,
                                   sandbox__kind=sandbox_kind)
    except ConfigError as error:
        raise click.UsageError(str(error)) from None
    from ..acp.server import serve
    from ..run.solve_request import SolveRequest

    asyncio.run(serve(SolveRequest(overrides=overrides, config_file=config_file, trust=trust,
                                   approval_mode=approval_mode)))
