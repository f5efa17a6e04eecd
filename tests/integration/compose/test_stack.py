"""A real stack in a real engine: up with ephemeral 127.0.0.1 ports that
answer, parallel stacks apart, and nothing of knell's left after down."""

from __future__ import annotations

import concurrent.futures

import pytest

from knell.owners import Owner
from knell.stores.compose import ComposeStack, doctor
from knell.stores.compose.engine import client
from tests.integration.compose.support import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.compose]


def test_stack_up_answers_on_ephemeral_loopback_ports_and_down_leaves_nothing(
    docker: None, tmp_path
) -> None:
    owner = Owner(states=tmp_path / "owners")
    stack = ComposeStack(owner=owner, log_dir=tmp_path)
    try:
        stack.up()
        assert stack.project.startswith(f"knell-{owner.pid}-")
        for service in ("postgres", "redis"):
            assert stack.ready(service), f"{service} through its link"
            assert stack.ready(service, direct=True), f"{service} direct"
            assert stack.url(service).startswith(("postgresql://", "redis://"))
        ports = {stack.address(s)[1] for s in stack.services}
        ports |= {stack.address(s, direct=True)[1] for s in stack.services}
        assert len(ports) == 4 and all(p >= 1024 for p in ports)
        for container in client().containers.list(
            filters={"label": f"com.docker.compose.project={stack.project}"}
        ):
            assert container.labels["knell"] == "1"
            assert container.labels["knell.owner"] == f"{owner.pid}-{owner.token}"
            for bindings in container.attrs["NetworkSettings"]["Ports"].values():
                assert all(b["HostIp"] == "127.0.0.1" for b in bindings or [])
        kinds = {r.split(" ")[0] for r in leftovers(stack.project)}
        assert kinds == {"container", "network", "volume"}
        records = (owner.path).read_text(encoding="utf-8")
        for kind in ("compose-project", "container", "network", "volume"):
            assert f'"kind":"{kind}"' in records
    finally:
        stack.down()
        owner.close()
    assert leftovers(stack.project) == []
    assert stack.timings["up"] > 0 and stack.timings["down"] > 0


def test_two_stacks_in_parallel_get_their_own_projects_and_ports(docker: None) -> None:
    stacks = [ComposeStack(("redis",)) for _ in range(2)]
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: s.up(), stacks))
        assert stacks[0].project != stacks[1].project
        assert stacks[0].address("redis") != stacks[1].address("redis")
        assert stacks[0].toxiproxy_url != stacks[1].toxiproxy_url
        assert all(s.ready("redis") for s in stacks)
        assert stacks[0].network().id != stacks[1].network().id
    finally:
        for stack in stacks:
            stack.down()
    assert all(leftovers(s.project) == [] for s in stacks)


def test_doctor_reports_engine_compose_and_images(docker: None) -> None:
    findings = {f.name: f for f in doctor()}
    assert findings["docker engine"].ok
    assert findings["compose"].ok and findings["compose"].detail
    assert {"built image postgres", "built image redis", "built image toxiproxy"} <= set(findings)
    assert all(f.ok for f in findings.values()), [f for f in findings.values() if not f.ok]
