"""Golden tests of the emitter: small C headers in ``headers/``, the files emitted for each in
``expected/<header stem>/``. Rewrite the expectations: ``python -m tests.golden --update``."""
