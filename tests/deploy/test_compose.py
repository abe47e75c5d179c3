"""The deployment files: docker-compose.yml (through `docker compose config`) and the Dockerfile.

The compose tests need only the docker CLI with the Compose v2 plugin, not a Docker engine
(`.ci/install-compose` installs the plugin); without it they are skipped with the reason.
The Dockerfile and CLI checks run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

#: compose service -> the `toolmesh run PART` it must run
PARTS = {name: name for name in
         ("config", "gateway", "agent", "prompt", "text-completion", "mcp-tool", "joke")}
DEFAULT_BUS = "amqp://guest:guest@rabbitmq:5672/"
PULSAR_BUS = "pulsar://pulsar:6650"
PULSAR_NAMESPACES = ("tg/request", "tg/response", "tg/notify", "tg/flow")

#: variables of the caller's shell that the compose file reads; the tests set their own
_OUR_PREFIXES = ("TOOLMESH_", "POSTGRES_", "PULSAR_", "COMPOSE_", "OPENAI_API_KEY")


# -- running docker compose --------------------------------------------------------------------

def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OUR_PREFIXES)}
    return {**env, **extra}


@cache
def _compose_version() -> str | None:
    """`docker compose version`, or None when it does not work here."""
    if shutil.which("docker") is None:
        return None
    try:
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True,
                              timeout=30, env=_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture(scope="module")
def compose() -> None:
    if _compose_version() is None:
        pytest.skip("`docker compose version` fails: the docker CLI or its Compose v2 plugin is "
                    "missing (run .ci/install-compose to install the plugin)")


def compose_config(file: Path, *args: str, env_file: Path,
                   **env: str) -> subprocess.CompletedProcess[str]:
    # relative paths (the build context) resolve against the repository wherever `file` is;
    # --env-file: an empty file instead of whatever .env lies in the repository
    return subprocess.run(
        ["docker", "compose", "--project-directory", str(ROOT), "--env-file", str(env_file),
         "-f", str(file), *args, "config", "--format", "json"],
        capture_output=True, text=True, timeout=60, env=_env(**env), cwd=ROOT)


def load_config(*args: str, env_file: Path, **env: str) -> dict[str, Any]:
    done = compose_config(COMPOSE_FILE, *args, env_file=env_file, **env)
    assert done.returncode == 0, f"docker compose config failed:\n{done.stderr}"
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def empty_env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("compose") / "empty.env"
    path.write_text("")
    return path


#: the one setting compose cannot start without
TOKEN = {"TOOLMESH_GATEWAY_TOKEN": "t0ken"}


@pytest.fixture(scope="module")
def default(compose: None, empty_env_file: Path) -> dict[str, Any]:
    """`docker compose config` with only the token set: RabbitMQ, offline demo model."""
    return load_config(env_file=empty_env_file, **TOKEN)


@pytest.fixture(scope="module")
def pulsar(compose: None, empty_env_file: Path) -> dict[str, Any]:
    """`TOOLMESH_BUS=pulsar://... docker compose --profile pulsar config`, a model and token set."""
    return load_config("--profile", "pulsar", env_file=empty_env_file,
                       TOOLMESH_BUS=PULSAR_BUS, TOOLMESH_GATEWAY_TOKEN="s3cret",
                       TOOLMESH_LLM_URL="http://host.docker.internal:11434/v1",
                       TOOLMESH_LLM_MODEL="llama3.2", TOOLMESH_LLM_API_KEY="sk-test")


def toolmesh_services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: config["services"][name] for name in PARTS}


# -- the compose file ----------------------------------------------------------------------------

def test_every_part_runs_toolmesh_run_part(default: dict[str, Any]) -> None:
    services = default["services"]
    assert set(PARTS) <= set(services)
    for name, part in PARTS.items():
        service = services[name]
        # the image's ENTRYPOINT is `toolmesh`; a service must not replace it
        assert service.get("entrypoint") in (None, ["toolmesh"]), name
        assert service["command"] == ["run", part], name
        assert service["build"]["context"] == str(ROOT), name
        assert service["build"].get("dockerfile", "Dockerfile") == "Dockerfile", name
        assert service["restart"] == "unless-stopped", name
    # one image for all of them
    assert len({s["image"] for s in toolmesh_services(default).values()}) == 1
    assert "x-toolmesh" in default  # the shared settings live in one extension


def test_joke_runs_two_replicas(default: dict[str, Any]) -> None:
    assert default["services"]["joke"]["deploy"]["replicas"] == 2
    for name in set(PARTS) - {"joke"}:
        assert (default["services"][name].get("deploy") or {}).get("replicas", 1) == 1, name


def test_the_default_bus_is_the_compose_rabbitmq(default: dict[str, Any]) -> None:
    for name, service in toolmesh_services(default).items():
        assert service["environment"]["TOOLMESH_BUS"] == DEFAULT_BUS, name
    assert "rabbitmq" in default["services"]
    assert "pulsar" not in default["services"] and "pulsar-init" not in default["services"]


def test_one_variable_switches_every_part_to_pulsar(pulsar: dict[str, Any]) -> None:
    for name, service in toolmesh_services(pulsar).items():
        assert service["environment"]["TOOLMESH_BUS"] == PULSAR_BUS, name


def test_config_uses_the_compose_postgresql(default: dict[str, Any]) -> None:
    store = default["services"]["config"]["environment"]["TOOLMESH_CONFIG_STORE"]
    assert re.fullmatch(r"postgresql://\w+:[^@]+@postgres:5432/\w+", store), store
    postgres = default["services"]["postgres"]
    env = postgres["environment"]
    assert store == (f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}"
                     f"@postgres:5432/{env['POSTGRES_DB']}")
    assert any(v["target"] == "/var/lib/postgresql/data" for v in postgres["volumes"])


def test_gateway_listens_on_all_addresses_inside_published_on_loopback_only(
        default: dict[str, Any], pulsar: dict[str, Any]) -> None:
    gateway = default["services"]["gateway"]
    assert gateway["environment"]["TOOLMESH_HOST"] == "0.0.0.0"
    assert gateway["environment"]["TOOLMESH_PORT"] == "8888"
    assert [(p["host_ip"], str(p["published"]), p["target"], p.get("protocol", "tcp"))
            for p in gateway["ports"]] == [("127.0.0.1", "8888", 8888, "tcp")]
    # nothing else is reachable from outside the host
    assert [name for name, s in pulsar["services"].items() if s.get("ports")] == ["gateway"]
    # the token passes through (and is required: see the test below)
    assert default["services"]["gateway"]["environment"]["TOOLMESH_GATEWAY_TOKEN"] == "t0ken"
    assert pulsar["services"]["gateway"]["environment"]["TOOLMESH_GATEWAY_TOKEN"] == "s3cret"


def test_compose_refuses_to_start_without_a_gateway_token(compose: None,
                                                          empty_env_file: Path) -> None:
    done = compose_config(COMPOSE_FILE, env_file=empty_env_file)
    assert done.returncode != 0
    assert "set TOOLMESH_GATEWAY_TOKEN" in done.stderr and "refuses to start" in done.stderr


def test_security_settings_pass_through(compose: None, empty_env_file: Path) -> None:
    config = load_config(env_file=empty_env_file, **TOKEN, TOOLMESH_SECRET_KEY="k",
                         TOOLMESH_MCP_STDIO_ALLOW="uvx", TOOLMESH_ALLOW_ORIGINS="http://x:1")
    services = config["services"]
    assert services["config"]["environment"]["TOOLMESH_SECRET_KEY"] == "k"
    assert services["config"]["environment"]["TOOLMESH_MCP_STDIO_ALLOW"] == "uvx"
    assert services["mcp-tool"]["environment"]["TOOLMESH_MCP_STDIO_ALLOW"] == "uvx"
    assert services["gateway"]["environment"]["TOOLMESH_ALLOW_ORIGINS"] == "http://x:1"
    # the key stays with the config service: no other part needs it
    assert [n for n, s in services.items()
            if "TOOLMESH_SECRET_KEY" in (s.get("environment") or {})] == ["config"]


def test_llm_settings_pass_through_to_text_completion(
        default: dict[str, Any], pulsar: dict[str, Any]) -> None:
    env = pulsar["services"]["text-completion"]["environment"]
    assert env["TOOLMESH_LLM_URL"] == "http://host.docker.internal:11434/v1"
    assert env["TOOLMESH_LLM_MODEL"] == "llama3.2"
    assert env["TOOLMESH_LLM_API_KEY"] == "sk-test"
    # unset: empty, which means the offline demo model
    assert not default["services"]["text-completion"]["environment"].get("TOOLMESH_LLM_URL")


def test_pulsar_profile_adds_broker_and_namespace_init(pulsar: dict[str, Any]) -> None:
    services = pulsar["services"]
    broker, init = services["pulsar"], services["pulsar-init"]
    for s in (broker, init):
        assert s["image"].startswith("apachepulsar/pulsar:")
        assert s["profiles"] == ["pulsar"]
    assert broker["command"][:2] == ["bin/pulsar", "standalone"]
    assert broker["healthcheck"]["test"]
    assert init["depends_on"]["pulsar"]["condition"] == "service_healthy"
    assert init["restart"] == "no"  # one-shot
    script = " ".join(init.get("entrypoint") or []) + " " + " ".join(init["command"])
    assert "bin/pulsar-admin" in script
    assert re.search(r"tenants create tg\b", script)
    assert "namespaces create" in script
    for namespace in PULSAR_NAMESPACES:
        assert namespace in script
    # the parts wait for the namespaces when the profile is on, and ignore the init when it is off
    for name, service in toolmesh_services(pulsar).items():
        init_dep = service["depends_on"]["pulsar-init"]
        assert init_dep["condition"] == "service_completed_successfully", name
        assert init_dep["required"] is False, name


def test_dependencies_wait_for_healthy_infrastructure(pulsar: dict[str, Any]) -> None:
    services = pulsar["services"]
    for name, service in toolmesh_services(pulsar).items():
        assert service["depends_on"]["rabbitmq"]["condition"] == "service_healthy", name
    assert services["config"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # every dependency exists (or is optional), and service_healthy targets have a healthcheck
    for name, service in services.items():
        for target, dep in (service.get("depends_on") or {}).items():
            assert target in services or dep.get("required") is False, (name, target)
            if dep["condition"] == "service_healthy":
                check = services[target].get("healthcheck") or {}
                assert check.get("test") and not check.get("disable"), (name, target)
    for name in ("postgres", "rabbitmq", "pulsar"):
        assert services[name]["restart"] == "unless-stopped"


#: name -> (how to break the file, what the error says)
BREAKAGES = {
    "bad yaml": (lambda text: text.replace("services:\n", "services:\n  oops: [\n", 1),
                 "yaml"),
    "bad replicas": (lambda text: text.replace("replicas: 2", "replicas: two", 1), "replicas"),
    "unknown dependency": (lambda text: text.replace(
        "condition: service_started", "condition: service_started\n      no-such-service:\n"
        "        condition: service_healthy", 1), "no-such-service"),
    "unknown key": (lambda text: text.replace(
        "restart: unless-stopped\n", "restart: unless-stopped\n  restrat: always\n", 1),
        "restrat"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_a_broken_compose_file_is_rejected(compose: None, empty_env_file: Path,
                                           tmp_path: Path, breakage: str) -> None:
    text = COMPOSE_FILE.read_text()
    breaker, complaint = BREAKAGES[breakage]
    broken = breaker(text)
    assert broken != text, "the breakage did not apply; update the test"
    path = tmp_path / "docker-compose.yml"
    path.write_text(broken)
    done = compose_config(path, "--profile", "pulsar", env_file=empty_env_file, **TOKEN)
    assert done.returncode != 0, f"{breakage}: docker compose config accepted it"
    assert complaint in done.stderr, done.stderr


def test_an_unbroken_copy_is_accepted(compose: None, empty_env_file: Path,
                                      tmp_path: Path) -> None:
    """The control for the test above: the copy itself passes the same way."""
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE_FILE.read_text())
    done = compose_config(path, "--profile", "pulsar", env_file=empty_env_file, **TOKEN)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["services"]["joke"]["build"]["context"] == str(ROOT)


# -- the parts the compose file runs exist in the CLI ------------------------------------------

def _toolmesh_command() -> list[str]:
    script = Path(sys.executable).parent / "toolmesh"
    if script.exists():
        return [str(script)]
    if found := shutil.which("toolmesh"):
        return [found]
    return [sys.executable, "-m", "toolmesh.cli.main"]


def _compose_parts() -> set[str]:
    """The PART of every `command: ["run", PART]` in docker-compose.yml, read without docker."""
    parts = set(re.findall(r'command:\s*\[\s*"run"\s*,\s*"([^"]+)"\s*\]', COMPOSE_FILE.read_text()))
    assert parts, "no `command: [\"run\", PART]` found in docker-compose.yml"
    return parts


def test_every_part_the_compose_file_runs_is_accepted_by_toolmesh_run() -> None:
    done = subprocess.run([*_toolmesh_command(), "run", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    words = set(re.findall(r"(?<![\w-])[a-z][\w-]*(?![\w-])", done.stdout))
    parts = _compose_parts()
    assert parts == set(PARTS.values())
    missing = sorted(parts - words)
    assert not missing, f"`toolmesh run --help` does not offer {missing}:\n{done.stdout}"


def test_compose_parts_match_the_json_config(default: dict[str, Any]) -> None:
    """The static reading above sees what docker compose sees."""
    used = {s["command"][1] for s in default["services"].values()
            if (s.get("command") or [None])[0] == "run"}
    assert used == _compose_parts()


# -- the Dockerfile -----------------------------------------------------------------------------

def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        lines.append(current + line)
        current = ""
    assert not current, "the Dockerfile ends in a continuation line"
    result = []
    for line in lines:
        instruction, _, args = line.partition(" ")
        result.append((instruction.upper(), args.strip()))
    return result


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (ins, _) in enumerate(instructions) if ins == "FROM")
    return instructions[last_from:]


def test_dockerfile_runs_the_toolmesh_command() -> None:
    stage = dict(final_stage())  # the last of each instruction wins, as in docker
    assert json.loads(stage["ENTRYPOINT"]) == ["toolmesh"]
    assert json.loads(stage["CMD"]) == ["run", "gateway"]
    assert json.loads(stage["CMD"])[1] in _compose_parts()
    # `toolmesh` is the package's console script
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "toolmesh" in scripts


def test_dockerfile_basics() -> None:
    instructions = dockerfile_instructions()
    stage = final_stage()
    assert stage[0][1].split()[0] == "python:3.11-slim"
    assert all(args.split()[0] == "python:3.11-slim" for ins, args in instructions
               if ins == "FROM")
    last = dict(stage)
    assert "8888" in last["EXPOSE"].split()
    assert last["STOPSIGNAL"] == "SIGTERM"
    user = last["USER"].split(":")[0]
    assert user not in ("root", "0")
    # the pulsar extra is installed, and no compiler toolchain is installed in the image shipped
    assert any(ins == "RUN" and re.search(r"pip install\b.*['\"]?\.\[pulsar\]", args)
               for ins, args in instructions)
    for ins, args in stage:
        if ins == "RUN":
            assert not re.search(r"\b(build-essential|gcc|g\+\+|python3-dev)\b", args), args


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or a parent decides."""
    def regex(pattern: str) -> re.Pattern[str]:
        out = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out)

    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        compiled = regex(pattern.lstrip("!").strip("/"))
        if any(compiled.fullmatch(p) for p in prefixes):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_what_the_build_copies_and_little_else() -> None:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    copied = []
    for ins, args in dockerfile_instructions():
        if ins == "COPY" and "--from" not in args:
            copied += args.split()[:-1]
    assert copied, "the Dockerfile copies nothing from the build context"
    for source in copied + ["src/toolmesh/cli/main.py"]:
        assert not _ignored(source, patterns), source
    for junk in (".git/HEAD", ".env", "tests/conftest.py", "bench/agent_step.py",
                 "src/toolmesh/__pycache__/runtime.cpython-311.pyc", "build/lib/x.py"):
        assert _ignored(junk, patterns), junk


def test_install_compose_script_is_executable_bash() -> None:
    script = ROOT / ".ci" / "install-compose"
    assert os.access(script, os.X_OK)
    assert script.read_text().startswith("#!/usr/bin/env bash")
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
