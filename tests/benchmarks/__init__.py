"""Smoke tests of the benchmark scripts: they run, and what they check holds at a tiny scale."""
