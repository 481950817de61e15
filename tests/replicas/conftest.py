"""Fixtures of the replica tests: a real Redis (and HAProxy, started per test)."""

from tests.support.services import redis_service, redis_url

__all__ = ["redis_service", "redis_url"]
