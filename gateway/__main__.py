"""`python -m gateway`."""

from gateway.cli import main

main()
