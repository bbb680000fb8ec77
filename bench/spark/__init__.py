"""The spark benchmark workload (see bench/README.md)."""
