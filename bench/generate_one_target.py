"""Run llama-bindgen's generate for the host triple only and llama.h only (what clang2py reads).

``python -m bench.generate_one_target TREE OUT``; prints the package folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from generator.emit import emit_package
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from generator.sources.licenses import llama_license


def main(argv: list[str]) -> int:
    tree, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    options = ParseOptions(tree=tree, wrapper_header=None, targets=())
    api = parse_interface(options, tree_source(tree))
    result = emit_package(api, out, llama_license=llama_license(tree))
    print(result.package_dir)  # the harness counts the output lines, outside the timed run
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
