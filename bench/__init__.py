"""Benchmarks of llama-bindgen against the alternatives (``python -m bench``, ``nox -s bench``).

Every figure is measured interleaved with its alternative in the same run and reported as the
median of repeated runs with the spread (min..max): the machines this runs on are shared.
"""
