"""The prepared GPU check: a kit made here (``prepare``) that a machine with an NVIDIA GPU and no
network runs in one go (``run``): build the pinned release's CUDA backend for that GPU only, run
the gates (build, symbols, layout with the ABI guard, smoke), write one JSON report.

One module a job: :mod:`.trim` (the trimmed tree), :mod:`.kit` (the kit: tree, wheels, test
models), :mod:`.unpack` (wheels into a folder, standard library only: it runs before the wheels
are installed), :mod:`.gpu` (nvidia-smi and nvcc), :mod:`.report` (the report), :mod:`.run` (the
run step). ``tools/gpu-check`` is the device's entry point; ``docs/how-to/gpu-check.md`` says how.
This package's ``__init__`` imports nothing: ``unpack`` runs where nothing is installed yet.
"""
