# toolmesh — one image for every part: `docker run IMAGE run PART` (config, gateway, agent,
# prompt, text-completion, mcp-tool, joke or MODULE:CLASS). See docs/deployment.md.
#
#   docker build -t toolmesh .
#   docker run --rm -p 127.0.0.1:8888:8888 -e TOOLMESH_GATEWAY_TOKEN toolmesh serve   # all in one
#
# The gateway listens on 0.0.0.0 inside the container, so it needs TOOLMESH_GATEWAY_TOKEN (or
# TOOLMESH_GATEWAY_TOKEN_FILE, e.g. a mounted secret): without one it exits at start, saying so.
#   docker run --rm -e TOOLMESH_BUS=amqp://guest:guest@rabbit:5672/ toolmesh run joke

# --- build stage: install into a virtual environment; nothing of this stage but the venv ships
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/toolmesh
WORKDIR /src
# only what `pip install .` needs (.dockerignore keeps the rest of the tree out)
COPY pyproject.toml README.md ./
COPY src ./src
# every dependency (asyncpg, pulsar-client, aio-pika, ...) comes as a binary wheel: no compiler
RUN /opt/toolmesh/bin/pip install '.[pulsar]' \
 && /opt/toolmesh/bin/toolmesh run --help >/dev/null \
 && /opt/toolmesh/bin/pip uninstall -y -q pip

# --- runtime stage
FROM python:3.11-slim

ENV PATH=/opt/toolmesh/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TOOLMESH_DATA_DIR=/data \
    TOOLMESH_HOST=0.0.0.0 \
    TOOLMESH_PORT=8888

RUN groupadd --system --gid 10001 toolmesh \
 && useradd --system --uid 10001 --gid toolmesh --home-dir /data --create-home \
            --shell /usr/sbin/nologin toolmesh

COPY --from=build /opt/toolmesh /opt/toolmesh

USER toolmesh:toolmesh
# a config service on the SQLite store keeps it here; mount a volume on /data for that
WORKDIR /data

# the gateway's port (the other parts listen on nothing: they only talk to the bus)
EXPOSE 8888
# every part answers the requests in hand and exits 0 on SIGTERM
STOPSIGNAL SIGTERM

ENTRYPOINT ["toolmesh"]
CMD ["run", "gateway"]
