"""Helpers the tests share: fake servers, tiny repositories, scripted turns, TUI drivers. Test modules import
from here, never from one another (tests/test_test_imports.py); fixtures live in tests/conftest.py."""
