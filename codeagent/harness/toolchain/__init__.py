"""Toolchains: what a repository needs by evidence (detect.py), its test command (test_command.py), the
layers that install them (deps.py), a user's repository's environment (resolve.py), a language task's
images (images.py), and what both keep of a layer that failed (kept.py)."""
