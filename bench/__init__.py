"""Benchmarks, one package per workload; shared helpers in bench.common (bench/README.md)."""
