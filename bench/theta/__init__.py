"""The theta benchmark workload (see bench/README.md)."""
