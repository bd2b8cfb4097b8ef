"""sha256 of files and ``SHA256SUMS`` files in the format ``sha256sum -c`` reads.

Runs on a bare CI runner (standard library only)::

    python -m generator.release.checksums write DIR   # SHA256SUMS over every file below DIR
    python -m generator.release.checksums check DIR   # verify DIR/SHA256SUMS; exit 1 on mismatch
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from generator.hashing import file_sha256

SUMS_NAME = "SHA256SUMS"


def sums_text(root: Path, names: Iterable[str]) -> str:
    """``<sha256>  <name>`` lines (two spaces: text mode, as sha256sum writes), sorted by name."""
    lines = [f"{file_sha256(root / name)}  {name}\n" for name in sorted(names)]
    return "".join(lines)


def files_below(root: Path) -> list[str]:
    """Every regular file below ``root`` (POSIX relative paths, sorted), except SHA256SUMS."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.relative_to(root).as_posix() != SUMS_NAME
    )


def write_sums(root: Path, names: Iterable[str] | None = None) -> Path:
    path = root / SUMS_NAME
    text = sums_text(root, files_below(root) if names is None else names)
    path.write_text(text, encoding="utf-8", newline="\n")
    return path


def check_sums(root: Path) -> list[str]:
    """Problems found verifying ``root/SHA256SUMS`` (empty when every listed file matches)."""
    path = root / SUMS_NAME
    if not path.is_file():
        return [f"{path} missing"]
    problems: list[str] = []
    listed = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            problems.append(f"{path}:{number}: not a sha256sum line")
            continue
        listed += 1
        target = root / name.lstrip("*")
        if not target.is_file():
            problems.append(f"{name}: missing")
        elif file_sha256(target) != digest:
            problems.append(f"{name}: sha256 mismatch")
    if listed == 0:
        problems.append(f"{path} lists no file")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("write", "check"):
        print("usage: python -m generator.release.checksums write|check DIR", file=sys.stderr)
        return 2
    root = Path(args[1])
    if args[0] == "write":
        print(write_sums(root))
        return 0
    problems = check_sums(root)
    for problem in problems:
        print(f"{root}: {problem}", file=sys.stderr)
    if not problems:
        print(f"{root / SUMS_NAME}: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
