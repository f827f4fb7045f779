"""Environment specs: SWE-bench-style Python specs (swebench.py) and language specs (languages.py), the
files, model and overrides they are read from, and which tests a task runs (directives.py)."""
