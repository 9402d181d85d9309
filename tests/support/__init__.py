"""Helpers shared by the tests (and by benchmarks/ and scripts/): servers, clients, span checks."""
