"""`codeagent view`: a local web page over the trajectory store, eval outputs and training metrics.

data.py reads (through the trajectory store's API and the eval runner's files), app.py serves it
(Starlette: token, Host check, strict headers), templates/ renders it (Jinja2, autoescaped); the click
command is cli/view_command.py (heavy imports inside it: `codeagent --help` stays instant).
"""
