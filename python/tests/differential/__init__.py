"""Differential conformance suite for pinloader (python/tests/test_differential.py).

space.py    the seeded enumerator: configuration i is a function of i alone
pysources   Python map-style and iterable datasets (importable by spawn workers)
native      small native data files written here and read back with numpy
oracle      the numpy transform definitions of docs/transforms.md
runner      one configuration through pinloader and through its oracle
"""
