"""llama-bindgen: keep bindings to llama.cpp correct, release after release."""

__version__ = "0.1.0"
# The oldest Python the tool and the bindings it makes run on (pyproject.toml's requires-python).
PYTHON_FLOOR = (3, 11)
