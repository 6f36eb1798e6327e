"""README's "Describe your own protocol" walks from ``protoframe init`` to a working client: this
runs its steps with its files, as a user would in an empty folder, so the walkthrough cannot go
stale. The files are the README's code blocks marked ``<!-- walkthrough: PATH -->``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.server_process import ServerProcess, ServerStartError

MARKED = re.compile(r"<!-- walkthrough: (\S+) -->\n```\w*\n(.*?)```\n", re.S)
LISTENING = re.compile(r"^listening on 127\.0\.0\.1:(\d+)$", re.M)


def walkthrough_files() -> dict[str, str]:
    """The README's files of the walkthrough, by their path in the user's project."""
    return dict(MARKED.findall((ROOT / "README.md").read_text(encoding="utf-8")))


def protoframe(*args: str, cwd: Path) -> str:
    """Run the installed ``protoframe`` command (the console script beside this Python)."""
    script = Path(sys.executable).with_name("protoframe")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "protoframe"]
    done = subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's folder after steps 1 to 3: init, the README's files, generate."""
    root = tmp_path_factory.mktemp("kvapp")
    protoframe("init", "kv", cwd=root)
    for path, text in walkthrough_files().items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    (root / "src" / "kvapp" / "__init__.py").touch()
    protoframe("generate", cwd=root)
    return root


def test_the_readme_names_the_files_it_walks_through() -> None:
    assert set(walkthrough_files()) == {"pyproject.toml", "src/kvapp/client.py",
                                        "src/kvapp/server.py"}


def test_generate_writes_the_package_the_files_import(project: Path) -> None:
    package = project / "src" / "kvapp" / "proto" / "kv"
    assert {p.name for p in package.glob("*.py")} >= {"frames.py", "machines.py", "client.py",
                                                       "kv.py"}
    assert "up to date" in protoframe("check", cwd=project)


def start_server(project: Path, env: dict[str, str]) -> tuple[ServerProcess, int]:
    """``python -m kvapp.server`` under the tests' watchdog; its port once it listens."""
    server = ServerProcess.create("kvapp")
    started = time.monotonic()
    try:
        process = server.launch([sys.executable, "-m", "kvapp.server"], env=env, cwd=project)
        while (found := LISTENING.search(server.log.read_text(errors="replace"))) is None:
            if process.poll() is not None or time.monotonic() > started + 60:
                raise ServerStartError(f"kvapp.server did not start:\n{server.log_tail()}")
            time.sleep(0.1)
        port = int(found.group(1))
        server.wait_for_port(port, started, 60)
    except BaseException:
        server.stop()
        raise
    return server, port


def test_the_client_talks_to_the_server_over_tcp(project: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(project / "src")}
    server, port = start_server(project, env)
    try:
        done = subprocess.run([sys.executable, "-m", "kvapp.client", str(port)], cwd=project,
                              env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "version 1: HELLO, KV\n"


@pytest.mark.slow
def test_mypy_strict_passes_on_the_files_and_the_generated_package(project: Path) -> None:
    env = {**os.environ, "MYPYPATH": f"{project / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "-p", "kvapp"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
