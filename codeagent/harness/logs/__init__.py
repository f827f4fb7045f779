"""Test logs -> {test id: status}: parsers.py and one module per language; offline.py: which failing
tests tried to reach the network."""
