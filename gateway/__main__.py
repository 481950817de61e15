"""`python -m gateway`."""

from gateway.cli.main import main

main()
