"""`codeagent serve`: a local model (with its LoRA adapter) behind an OpenAI-compatible chat endpoint, on
Starlette served by uvicorn (the stack of `codeagent view`). Serving, not training: nothing here imports
codeagent.train or the training libraries (an import-linter contract in pyproject.toml).

One job per module:
    server.py       the server (in a thread or in the foreground), its limits, loading the served model
    app.py          the HTTP routes and their refusals (Host, origin, method, content type, body size)
    connections.py  uvicorn's connection with a cap on connections and a deadline for each request to arrive
    chat.py         the request -> response logic, independent of HTTP; schema.py the request's shape
    commands.py     the work of `codeagent serve` (its click definition: cli/serve_command.py)
"""
