"""Recursive views maintained with absorption provenance or DRed
(``recursive-views-absorption-provenance.txt``)."""
