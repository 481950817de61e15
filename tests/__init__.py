"""The tests, and the interop runners under `python -m tests...`, see the SDK's packages as `serve` does."""

from gateway.runtime import lazysdk

lazysdk.install()
