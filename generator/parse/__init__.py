"""libclang front end: headers of one llama.cpp tree (and the MTP wrapper) -> IR ``Interface``.

``generator.parse.frontend`` has the entry points; only ``generator.parse.clang_api`` imports
``clang.cindex``. This package file stays empty so that ``generator.parse.options`` can be
imported without loading libclang.
"""
