# One image for the three control-plane processes (web, worker, beat); docker-compose.yml picks the command.
FROM python:3.11-slim-bookworm

# PySpark needs a JVM; Java 17 is what the engine is tested with.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY engine engine
COPY webapp webapp
COPY tasks tasks
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install --no-cache-dir .

ENV TIDEMARK_STATE_DIR=/data/state \
    TIDEMARK_TABLE_ROOTS=/data/tables \
    PYTHONUNBUFFERED=1
VOLUME ["/data"]
EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "4"]
