"""The common benchmark workload (see bench/README.md)."""
