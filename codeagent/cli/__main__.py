"""`python -m codeagent.cli`."""

from . import main

main()
