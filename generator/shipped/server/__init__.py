"""An OpenAI-compatible HTTP server on one model (``llama-bindings serve``; the ``server`` extra:
``pip install 'llama-bindings[server]'``).

One context's sequences are its slots (:class:`~llama_bindings.runtime.Slots`: continuous
batching, the slot with the longest common prefix, every speculative mode per slot); OpenAI's
``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings`` and ``/v1/models``, with
``/health`` and Prometheus ``/metrics``. Modules: :mod:`.config` (flags and TOML),
:mod:`.served` (what is loaded), :mod:`.requests` (request bodies checked), :mod:`.app` (the
Starlette application and its guard: API key, body limit, stopping), :mod:`.metrics`,
:mod:`.cli` (the command)."""
