"""Sub-commands of ``llama-bindgen``; each module registers one verb."""
