"""The tpch benchmark workload (see bench/README.md)."""
