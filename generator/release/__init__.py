"""Releases: gate checks, reproducible archives, the assets manifest, notes, and publishing.

``llama-bindgen release REF`` (``generator.commands.release``) drives
:func:`generator.release.assemble.assemble_release` and, with ``--publish``,
:mod:`generator.release.github`. ``llama-bindgen matrix`` renders the CI workflow from
:mod:`generator.release.ci_matrix`. This package's ``__init__`` imports nothing, so
``python -m generator.release.checksums`` runs on a bare CI runner with only the standard library.
"""
