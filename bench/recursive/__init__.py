"""The recursive benchmark workload (see bench/README.md)."""
