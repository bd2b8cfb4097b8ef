"""Obtaining verified llama.cpp trees: providers, content digests, safe extraction, the cache."""
