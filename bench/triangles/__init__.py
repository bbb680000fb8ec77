"""The triangles benchmark workload (see bench/README.md)."""
