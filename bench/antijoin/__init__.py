"""The antijoin benchmark workload (see bench/README.md)."""
