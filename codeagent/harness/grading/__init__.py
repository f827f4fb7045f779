"""Grading: the verdict (verdict.py), the flow (plan.py, task_env.py), integrity rules, the tamper-evident
pytest run (guard.py, pytest_guard_plugin.py), the judge (judge/), prebuilt layouts' rules, the box's files."""
