"""Reading the gateway's metrics as a Prometheus scraper does: every sample by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> tuple[set[str], Samples]:
    """The family names in a Prometheus text exposition, and every sample's value."""
    families = list(text_string_to_metric_families(text))
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in families
        for sample in family.samples
    }
    return {family.name for family in families}, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 for a series not (yet) exposed."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def growth(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """How much one series grew between two scrapes."""
    return value(after, name, **labels) - value(before, name, **labels)
