"""One run of the bench's "rpc" section, a process of its own: load the model (locally, or split
over the spec's RPC servers), generate greedily, print the figures as one JSON line."""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def main(spec: dict[str, Any]) -> dict[str, Any]:
    from llama_bindings import load
    from llama_bindings.runtime import Context, Model, SpeculativeDecoding, SpeculativeMode

    libs = load(spec["lib_dir"])
    split: dict[str, Any] = {}
    if spec["servers"]:
        split = {"rpc_servers": spec["servers"], "n_gpu_layers": spec["n_gpu_layers"]}
        split["tensor_split"] = [1.0] * len(spec["servers"])
    mtp = spec["mode"] == "draft-mtp"
    mode = SpeculativeMode.DRAFT_MTP if mtp else SpeculativeMode.NONE
    start = time.perf_counter()
    # no repacked CPU weight layouts on either side: a worker's CPU device keeps the file's
    # layout, and the local run must compute the same way for the outputs to be comparable
    with Model(spec["model"], libs=libs, load_mtp=mtp, use_extra_bufts=False, **split) as model:
        load_s = time.perf_counter() - start
        with Context(model, n_ctx=512, n_threads=spec["threads"],
                     speculative=SpeculativeDecoding(mode)) as ctx:  # fmt: skip
            result = ctx.generate(spec["prompt"], max_tokens=spec["n"])
    return {
        "load_s": load_s,
        "tokens_per_second": result.metrics.tokens_per_second,
        "tokens": list(result.tokens),
        "acceptance_rate": result.metrics.acceptance_rate,
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
