"""Environment specs: SWE-bench-style Python specs (swebench.py), language specs (languages.py), the
`toolchain:` sections of languages/*.yaml (toolchains.py), the files, model and overrides they are read from,
and which tests a task runs (directives.py)."""
