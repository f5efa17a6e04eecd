"""The platform guard: POSIX-only process control lives in knell.platform.

knell must run on Windows as well as Linux, and the calls that differ
between them (hard kills, suspension, process groups, parent-death
signals, user switching, file locks) are kept behind one module per
platform in ``src/knell/platform/``. This guard fails the lint when such a
call appears anywhere else, so a Windows break is caught on a Linux
laptop, before a Windows runner ever sees it.

Usage: ``python tools/platform_guard.py [ROOT ...]`` (default ``src/knell``).
Exit 1 and one line per finding (``file:line: what``) when anything is found.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

POSIX_ATTRIBUTES = {
    "os": {
        "fork", "forkpty", "killpg", "setuid", "setgid", "seteuid", "setegid", "setsid",
        "setpgid", "getpgid", "setpgrp", "getpgrp", "wait3", "wait4", "WNOHANG",
        "setresuid", "setresgid", "initgroups", "chown", "lchown",
    },
    "signal": {
        "SIGKILL", "SIGSTOP", "SIGCONT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGCHLD",
        "SIGQUIT", "SIGTSTP", "SIGALRM", "alarm", "setitimer", "pthread_kill",
        "pthread_sigmask", "siginterrupt",
    },
}  # fmt: skip
POSIX_MODULES = {"fcntl", "pwd", "grp", "resource", "termios", "pty", "tty", "posix"}
POSIX_KEYWORDS = {"preexec_fn", "start_new_session", "process_group", "user", "group"}
POSIX_NAMES = {"prctl"}
ALLOWED = Path("src/knell/platform")


def _findings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in POSIX_MODULES:
                    yield node.lineno, f"imports POSIX-only module {alias.name!r}"
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in POSIX_MODULES:
                yield node.lineno, f"imports from POSIX-only module {node.module!r}"
            for alias in node.names:
                if alias.name in POSIX_ATTRIBUTES.get(root, ()):
                    yield node.lineno, f"imports POSIX-only {root}.{alias.name}"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in POSIX_ATTRIBUTES.get(node.value.id, ()):
                yield node.lineno, f"uses POSIX-only {node.value.id}.{node.attr}"
            elif node.attr in POSIX_NAMES:
                yield node.lineno, f"uses {node.attr}"
        elif isinstance(node, ast.Name) and node.id in POSIX_NAMES:
            yield node.lineno, f"uses {node.id}"
        elif isinstance(node, ast.Call):
            callee = node.func
            is_popen = (isinstance(callee, ast.Attribute) and callee.attr in {
                "Popen", "run", "call", "check_call", "check_output",
            }) or (isinstance(callee, ast.Name) and callee.id == "Popen")  # fmt: skip
            for keyword in node.keywords:
                if keyword.arg in POSIX_KEYWORDS and (is_popen or keyword.arg == "preexec_fn"):
                    yield node.lineno, f"passes POSIX-only {keyword.arg}= to a subprocess"


def check(roots: list[Path]) -> list[str]:
    problems: list[str] = []
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            if ALLOWED in path.parents or path.parent == ALLOWED:
                continue
            if any(part == "platform" for part in path.parts) and "knell" in path.parts:
                continue
            problems += [f"{path}:{line}: {what}" for line, what in _findings(path)]
    return problems


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("src/knell")]
    problems = check(roots)
    for line in problems:
        print(line)
    if problems:
        print(
            f"{len(problems)} POSIX-only call(s) outside src/knell/platform/: move them into "
            "the platform module (one function per platform)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
