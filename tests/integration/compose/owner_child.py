"""A runner stand-in for the reap tests: records itself as an owner, brings
a Redis stack up (or, given REPLICAS, a Postgres primary and that many
replicas), prints the project name, and waits to be SIGKILLed.

python owner_child.py STATES_DIR PARENT_PID [REPLICAS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from knell.owners import Owner
from knell.platform import die_with_parent
from knell.stores.compose import ComposeStack

if __name__ == "__main__":
    die_with_parent(int(sys.argv[2]))
    owner = Owner(states=Path(sys.argv[1]))
    replicas = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    services = ("postgres",) if replicas else ("redis",)
    stack = ComposeStack(services, owner=owner, log_dir=Path(sys.argv[1]), replicas=replicas)
    stack.up()
    print(stack.project, owner.path, flush=True)
    time.sleep(600)
