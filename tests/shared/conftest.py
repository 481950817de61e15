"""Fixtures of the shared-state tests: a real Redis."""

from tests.support.services import redis_service, redis_url

__all__ = ["redis_service", "redis_url"]
