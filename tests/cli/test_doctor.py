"""``toolmesh doctor`` and ``toolmesh serve``'s start-up word on shadowed ``tg-*`` commands,
run as a user runs them (the console script, in a subprocess) in real environments: this one,
with the real trustgraph-cli's venv put first on PATH, and a venv where trustgraph-cli was
installed over toolmesh's scripts."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import ROOT, console_script
from tests.servers import toolmesh_serve
from toolmesh.cli import script_shadows

TOKEN = "doctor-test-token-0123456789abcdef"
BIN = Path(console_script()).parent
#: a PATH with toolmesh's bin directory and the system's, nothing of the machine's own
CLEAN_PATH = os.pathsep.join([str(BIN), "/usr/local/bin", "/usr/bin", "/bin"])


async def doctor(*args: str, path: str, command: str | None = None) -> tuple[int, str]:
    """``toolmesh doctor ARGS`` with ``path`` as PATH: exit code, and what it printed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLMESH_", "TRUSTGRAPH_"))} | {"PATH": path}
    proc = await asyncio.create_subprocess_exec(
        command or console_script(), "doctor", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def test_toolmesh_s_tg_commands_are_read_from_its_entry_points() -> None:
    scripts = script_shadows.toolmesh_scripts()
    assert len(scripts) == 12 and scripts["tg-put-config-item"] == \
        "toolmesh.cli.tg_config:put_config_item"
    assert set(script_shadows.FORMS) == set(scripts)  # advice for each, none for others
    assert (script_shadows.toolmesh_bin_dir() / "toolmesh").samefile(console_script())


def test_a_script_of_another_distribution_first_on_path_is_named_with_its_owner(
        tmp_path: Path) -> None:
    # an environment of a package "other-tg": its script, and its dist-info saying whose it is
    env = tmp_path / "other"
    site = env / "lib" / "python3.11" / "site-packages" / "other_tg-1.0.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: other-tg\nVersion: 1.0\n")
    (site / "entry_points.txt").write_text(
        "[console_scripts]\ntg-put-config-item = other.cli.put:main\n")
    (env / "bin").mkdir()
    script = env / "bin" / "tg-put-config-item"
    script.write_text(f"#!{env}/bin/python\nimport sys\nfrom other.cli.put import main\n"
                      "sys.exit(main())\n")
    script.chmod(0o755)
    ours = {"tg-put-config-item": "toolmesh.cli.tg_config:put_config_item"}

    found, _ = script_shadows.shadows(scripts=ours, bin_dir=BIN,
                                      path=f"{env / 'bin'}{os.pathsep}{BIN}")
    [shadow] = found
    assert shadow.where == "path" and shadow.found is not None
    assert shadow.found.owner == "other-tg" and shadow.found.target == "other.cli.put:main"
    assert shadow.message() == (f"tg-put-config-item: PATH runs {script}, other-tg's "
                                "(other.cli.put:main)")
    assert "run `toolmesh doctor`" in (script_shadows.summary(found) or "")

    # toolmesh's own first: nothing to say
    assert script_shadows.shadows(scripts=ours, bin_dir=BIN,
                                  path=f"{BIN}{os.pathsep}{env / 'bin'}") == ([], [])
    # toolmesh's own overwritten in its bin directory (pip installed the other over it)
    found, _ = script_shadows.shadows(scripts=ours, bin_dir=env / "bin", path=str(env / "bin"))
    assert [(s.where, s.found and s.found.owner) for s in found] == [("bin", "other-tg")]
    assert found[0].message().startswith(f"tg-put-config-item: toolmesh's {script} was "
                                         "replaced by other-tg's")


@pytest.mark.slow  # seconds, measured (tests/conftest.py)
async def test_doctor_passes_with_toolmesh_s_commands_first_and_checks_the_token(
        tmp_path: Path) -> None:
    async with toolmesh_serve(tmp_path, extra_env={"TOOLMESH_GATEWAY_TOKEN": TOKEN}) as served:
        code, out = await doctor("-u", served.url, "-t", TOKEN, path=CLEAN_PATH)
        wrong_code, wrong = await doctor("-u", served.url, "-t", TOKEN + "x", path=CLEAN_PATH)
    assert code == 0, out
    assert f"ok    tg-* commands: toolmesh's 12 in {BIN} are the ones PATH runs" in out
    assert f"ok    gateway {served.url}: answers; the token is accepted" in out
    assert wrong_code == 1 and "refused the request (401)" in wrong, wrong
    assert "toolmesh token create" in wrong
    assert "toolmesh doctor" not in "".join(served.log)  # nothing shadowed: nothing said

    # the same URL once the gateway stopped: nothing listens there now
    gone_code, gone = await doctor("-u", served.url, path=CLEAN_PATH)
    assert gone_code == 1 and "cannot reach the gateway" in gone and "--no-gateway" in gone
    code, out = await doctor("-u", served.url, "--no-gateway", path=CLEAN_PATH)
    assert code == 0 and "gateway" not in out, out


@pytest.mark.slow
async def test_doctor_and_serve_name_trustgraph_cli_s_commands_first_on_path(
        tmp_path: Path) -> None:
    from tests.compat.tgcli import install

    tg_bin = await asyncio.to_thread(lambda: install() / "bin")
    path = f"{tg_bin}{os.pathsep}{CLEAN_PATH}"
    code, out = await doctor("--no-gateway", path=path)
    assert code == 1, out
    for name in script_shadows.toolmesh_scripts():
        assert f"FAIL  {name}: PATH runs {tg_bin / name}, trustgraph-cli's (trustgraph.cli." \
            in out, out
    assert "use: tg-put-config-item --type T --key K --stdin < FILE" in out
    assert "use: toolmesh tools (TrustGraph's tg-show-tools has no status row)" in out
    assert f"toolmesh's own are in {BIN}" in out and "pipx install trustgraph-cli" in out

    async with toolmesh_serve(tmp_path, extra_env={"PATH": path}) as served:
        warned = [line for line in served.log if "tg-* commands" in line]
    assert len(warned) == 1 and " WARNING " in warned[0], served.log
    assert "12 of toolmesh's tg-* commands are trustgraph-cli's here" in warned[0]
    assert "run `toolmesh doctor`" in warned[0]


@pytest.mark.slow
def test_doctor_says_how_to_get_toolmesh_s_scripts_back_after_trustgraph_cli_overwrote_them(
        tmp_path: Path) -> None:
    from tests.compat.tgcli import TRUSTGRAPH_CLI

    # a venv holding a copy of this checkout (its dependencies: the suite's own, seen through
    # --system-site-packages), then trustgraph-cli installed over it, as a user would
    source = tmp_path / "toolmesh"
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True)

    def pip(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                        "-q", *args], check=True, timeout=600, capture_output=True)

    def run_doctor() -> tuple[int, str]:
        done = subprocess.run([str(venv / "bin" / "toolmesh"), "doctor", "--no-gateway"],
                              env={**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}"
                                                         f"{CLEAN_PATH}"},
                              capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout + done.stderr

    pip("install", "--no-deps", str(source))
    pip("install", "--no-deps", TRUSTGRAPH_CLI)
    code, out = run_doctor()
    assert code == 1, out
    put = venv / "bin" / "tg-put-config-item"
    assert (f"FAIL  tg-put-config-item: toolmesh's {put} was replaced by trustgraph-cli's "
            "(trustgraph.cli.put_config_item:main)") in out, out
    assert out.count(" was replaced by trustgraph-cli's ") == 12, out
    assert "pip uninstall trustgraph-cli, then pip install --force-reinstall --no-deps " \
           "toolmesh" in out

    # the remedy it gives, followed: toolmesh's scripts back, and doctor content
    pip("uninstall", "-y", "trustgraph-cli")
    code, out = run_doctor()
    assert code == 1 and out.count("missing from toolmesh's bin directory") == 12, out
    assert "to get them back: pip install --force-reinstall --no-deps toolmesh" in out
    pip("install", "--force-reinstall", "--no-deps", str(source))
    code, out = run_doctor()
    assert code == 0 and "ok    tg-* commands: toolmesh's 12" in out, out
