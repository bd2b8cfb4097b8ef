"""llama-bindgen: keep bindings to llama.cpp correct, release after release."""

__version__ = "0.1.0"
