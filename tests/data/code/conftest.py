# Files under tests/data/code are fixtures (source code to parse and index), not tests to run.
collect_ignore_glob = ["*"]
