# The gateway itself, for `docker compose up` on hosts that reach a container registry.
FROM python:3.11-slim-bookworm
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway gateway
COPY servers servers
COPY skills skills
# The replicas extra (PostgreSQL and Redis clients) lets one image serve alone or as a replica.
RUN pip install --no-cache-dir ".[replicas]"
ENV GATEWAY_DATA_DIR=/var/lib/mcp-gateway
EXPOSE 8000
CMD ["python", "-m", "gateway", "serve", "--host", "0.0.0.0", "--port", "8000"]
