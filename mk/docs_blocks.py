"""The user docs' code blocks, run (mk/docs.mk; how and why: docs/design/docs.md).

    python mk/docs_blocks.py stage DIR        docs/ with README.md as DIR/index.md, for mkdocs
    python mk/docs_blocks.py run              every block of the user docs, by its tag
    python mk/docs_blocks.py quickstart LANG  the README's quick start block for LANG

User docs: README.md, docs/guide/*.md, docs/reference/*.md. Every fenced
block is tagged; a tag other than these fails the run, so no block goes
unrun by accident:

- python: run with this interpreter (the venv with the built extension); a
  page's blocks share one namespace, top to bottom, from a scratch folder.
- yaml: a whole profile, checked as `breakerbank check` does and built into
  a bank with `Bank.from_yaml`.
- c: a whole program, compiled with -Wall -Wextra -Werror against the
  header and the static library, and run. A block whose first line is a
  comment naming a file (`/* quickstart.c */`) is also written there for
  the page's sh blocks.
- sh: run by bash from a scratch folder holding links to the repository's
  top-level entries, with the venv first on PATH. `make` only checks that
  its targets exist (`make test` would run this very test), `pip
  install` only checks that the paths it names exist, and `cargo` runs
  `build` for real but only checks the package and example of `run`.
- rust: compiled and run as doc tests of the core (core/src/lib.rs includes
  each page that has one); this script checks that each such page is
  included.
- text (and rust,ignore: code that needs crates the core does not have):
  shown, not run. Kept for output, diagrams and the few commands that
  cannot run here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAGS = {"python", "yaml", "c", "sh", "rust", "text"}
CC_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"]
FFI_LIB = "target/release/libbreakerbank_ffi.a"
LDLIBS = ["-lpthread", "-ldl", "-lm"]


@dataclass
class Block:
    path: Path
    line: int
    tag: str
    code: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def user_docs() -> list[Path]:
    docs = REPO / "docs"
    return [REPO / "README.md", *sorted((docs / "guide").glob("*.md")), *sorted((docs / "reference").glob("*.md"))]


FENCE = re.compile(r"^(\s*)(```+)\s*([^\s`]*)\s*$")


def blocks(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.groups()
        start = i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != ticks:
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            i += 1
        i += 1
        tag = info.split(",")[0].split("{")[0].strip()
        if info.replace(" ", "") in {"rust,ignore", "text,ignore"}:
            tag = "text"  # rustdoc's own "not compiled": code for other crates
        out.append(Block(path, start, tag, "\n".join(body) + "\n"))
    return out


# -- stage -------------------------------------------------------------------


def stage(dest: Path) -> None:
    """docs/ as mkdocs reads it, with the README as the home page."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(REPO / "docs", dest)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (dest / "index.md").write_text(readme.replace("](docs/", "]("), encoding="utf-8")


# -- run ---------------------------------------------------------------------


class Failed(Exception):
    pass


def run_python(page: list[Block], scratch: Path) -> None:
    ns: dict[str, object] = {"__name__": "__docs__"}
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        for b in page:
            out = io.StringIO()
            try:
                code = compile(b.code, b.where(), "exec")
                with contextlib.redirect_stdout(out):
                    exec(code, ns)
            except BaseException:
                raise Failed(f"{b.where()}: python block raised\n{traceback.format_exc()}") from None
    finally:
        os.chdir(cwd)


def run_yaml(b: Block) -> None:
    import breakerbank as bb
    from breakerbank._native import check_profile

    problems = check_profile(b.code)
    if problems:
        raise Failed(f"{b.where()}: yaml block is not a valid profile: {problems}")
    try:
        bb.Bank.from_yaml(b.code, clock=bb.ManualClock())
    except bb.BreakerError as e:
        raise Failed(f"{b.where()}: Bank.from_yaml refused the yaml block: {e}") from None


def c_name(b: Block) -> str | None:
    m = re.match(r"\s*/\*\s*([\w.-]+\.c)\s*\*/", b.code)
    return m.group(1) if m else None


def run_c(b: Block, scratch: Path, n: int) -> None:
    if not re.search(r"\bint\s+main\s*\(", b.code):
        raise Failed(f"{b.where()}: a c block must be a whole program (no main); tag a fragment `text`")
    src = scratch / f"block{n}.c"
    src.write_text(b.code, encoding="utf-8")
    exe = scratch / f"block{n}"
    cc = os.environ.get("CC", "cc")
    build = subprocess.run(
        [cc, *CC_FLAGS, f"-I{REPO / 'include'}", "-o", str(exe), str(src), str(REPO / FFI_LIB), *LDLIBS],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        raise Failed(f"{b.where()}: c block does not compile:\n{build.stderr}")
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, cwd=scratch)
    if ran.returncode != 0:
        raise Failed(f"{b.where()}: c block exited {ran.returncode}:\n{ran.stdout}{ran.stderr}")


# The commands sh blocks may not run for real (see the module's docstring).
SH_PRELUDE = r"""
set -euo pipefail
make() {
  # Only that each target exists: `make -n` would still run the recipe
  # lines that call $(MAKE) (fuzz-short's, under `make test`).
  local db t
  db=$(command make --no-print-directory -C "$DOCS_REPO" -pq __docs_no_such_target__ 2>/dev/null || true)
  for t in "$@"; do
    case "$t" in -*|*=*) continue ;; esac
    grep -q "^$t:" <<<"$db" || { echo "docs: make: no target $t" >&2; return 1; }
  done
}
pip() {
  [ "${1:-}" = install ] || { echo "docs: only 'pip install' is checked, not: pip $*" >&2; return 1; }
  shift
  local a
  for a in "$@"; do
    case "$a" in
      -*) ;;
      *) a="${a%%\[*}"; [ -e "$a" ] || { echo "docs: pip install: no such path: $a" >&2; return 1; } ;;
    esac
  done
}
cargo() {
  case "${1:-}" in
    build) (cd "$DOCS_REPO" && command cargo "$@" --quiet) ;;
    run)
      local pkg="" example="" prev=""
      for a in "$@"; do
        case "$prev" in -p) pkg="$a" ;; --example) example="$a" ;; esac
        prev="$a"
      done
      grep -q "^name = \"$pkg\"" "$DOCS_REPO"/*/Cargo.toml \
        || { echo "docs: cargo run: no package $pkg" >&2; return 1; }
      [ -z "$example" ] || ls "$DOCS_REPO"/*/examples/"$example".rs >/dev/null \
        || { echo "docs: cargo run: no example $example" >&2; return 1; }
      ;;
    *) echo "docs: cargo $1 is not run by the docs test" >&2; return 1 ;;
  esac
}
"""


def run_sh(b: Block, scratch: Path) -> None:
    env = dict(os.environ)
    env["DOCS_REPO"] = str(REPO)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    script = SH_PRELUDE + b.code
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=scratch, env=env, timeout=300)
    if ran.returncode != 0:
        raise Failed(f"{b.where()}: sh block exited {ran.returncode}:\n{ran.stdout}{ran.stderr}")


def doctest_pages() -> set[str]:
    lib = (REPO / "core/src/lib.rs").read_text(encoding="utf-8")
    return {m for m in re.findall(r'include_str!\("\.\./\.\./([^"]+)"\)', lib)}


def scratch_for(page: Path, root: Path) -> Path:
    """A folder with links to the repository's top-level entries."""
    scratch = Path(tempfile.mkdtemp(prefix=page.stem + "-", dir=root))
    for entry in REPO.iterdir():
        if entry.name not in {".git", "site"}:
            (scratch / entry.name).symlink_to(entry)
    return scratch


def run() -> int:
    started = time.monotonic()
    counts = {tag: 0 for tag in TAGS}
    failures: list[str] = []
    included = doctest_pages()
    with tempfile.TemporaryDirectory(prefix="docs-blocks-") as tmp:
        for path in user_docs():
            page = blocks(path)
            rel = str(path.relative_to(REPO))
            scratch = scratch_for(path, Path(tmp))
            for b in page:
                if b.tag not in TAGS:
                    failures.append(f"{b.where()}: block tagged {b.tag or '(nothing)'!r}: tag it one of {sorted(TAGS)}")
            if any(b.tag == "rust" for b in page) and rel not in included:
                failures.append(f"{rel}: has rust blocks but core/src/lib.rs does not include it as doc tests")
            for b in page:
                if b.tag == "c" and (name := c_name(b)):
                    link = scratch / name
                    if link.is_symlink() or link.exists():
                        link.unlink()
                    link.write_text(b.code, encoding="utf-8")
            t0 = time.monotonic()
            try:
                run_python([b for b in page if b.tag == "python"], scratch)
            except Failed as e:
                failures.append(str(e))
            counts["python"] += sum(b.tag == "python" for b in page)
            if (took := time.monotonic() - t0) > 2:
                print(f"docs: {rel}'s python blocks took {took:.1f} s")
            for n, b in enumerate(page):
                t0 = time.monotonic()
                try:
                    if b.tag == "yaml":
                        run_yaml(b)
                    elif b.tag == "c":
                        run_c(b, scratch, n)
                    elif b.tag == "sh":
                        run_sh(b, scratch)
                except Failed as e:
                    failures.append(str(e))
                except subprocess.TimeoutExpired:
                    failures.append(f"{b.where()}: {b.tag} block timed out")
                if b.tag in {"yaml", "c", "sh", "rust", "text"}:
                    counts[b.tag] += 1
                if (took := time.monotonic() - t0) > 2:
                    print(f"docs: {b.where()} ({b.tag}) took {took:.1f} s")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    ran = counts["python"] + counts["yaml"] + counts["c"] + counts["sh"]
    print(
        f"docs blocks: {counts['python']} python, {counts['yaml']} yaml, {counts['c']} c, {counts['sh']} sh run;"
        f" {counts['rust']} rust (as doc tests); {counts['text']} text not run"
        f" ({time.monotonic() - started:.1f} s)"
    )
    print(f"docs-blocks: {ran - min(len(failures), ran)} passed, {len(failures)} failed")
    return 1 if failures else 0


def quickstart(lang: str) -> int:
    """The README's block of `lang` under its "### <Lang>" quick start heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    heading = {"python": "### Python", "rust": "### Rust", "c": "### C"}[lang]
    start = lines.index(heading)
    for b in blocks(REPO / "README.md"):
        if b.line > start and b.tag == lang:
            sys.stdout.write(b.code)
            return 0
    print(f"no {lang} block under {heading!r} in README.md", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["stage"] and len(argv) == 2:
        stage(Path(argv[1]))
        return 0
    if argv == ["run"]:
        return run()
    if argv[:1] == ["quickstart"] and len(argv) == 2:
        return quickstart(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
