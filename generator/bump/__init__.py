"""``llama-bindgen bump``: fetch, generate, diff, build, verify and record one llama.cpp release."""
