# The image of compose.yaml's services (the scale profile). llama-cpp-python compiles from
# source on the first build (a C/C++ toolchain and cmake are needed for it).
FROM python:3.12-slim
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
ENV AGENTLAB_VAR_DIR=/var/lib/agentlab PYTHONUNBUFFERED=1
