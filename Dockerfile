# GPU Lab in a container.
#
#   docker build -t gpulab .
#   docker run --gpus all -p 127.0.0.1:8501:8501 -v gpulab-data:/data gpulab
#
# The base image brings PyTorch with CUDA; it is never reinstalled (the requirements are installed
# under a constraint pinning the base's torch, beside requirements.lock for everything else). For a CPU-only image:
#
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm -t gpulab:cpu .
#
# A base without torch gets the CPU wheel from TORCH_INDEX_URL. The server listens on 0.0.0.0 inside
# the container only; publish the port on 127.0.0.1 (as above) and reach a remote box by SSH tunnel.
ARG BASE_IMAGE=pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    GPULAB_DATA_DIR=/data \
    GPULAB_LOCK_DIR=/tmp/gpulab-locks

# Chromium renders PNG/SVG exports (kaleido). Debian bases have a real `chromium` package; Ubuntu
# bases (the PyTorch images) only have a snap stub, so they get Chrome for Testing and its libraries.
RUN apt-get update \
 && if apt-cache show chromium >/dev/null 2>&1; then \
      apt-get install -y --no-install-recommends chromium fonts-liberation; \
    else \
      apt-get install -y --no-install-recommends ca-certificates fonts-liberation libasound2 libatk-bridge2.0-0 \
        libatk1.0-0 libcairo2 libcups2 libdrm2 libgbm1 libgtk-3-0 libnss3 libpango-1.0-0 libxcomposite1 \
        libxdamage1 libxfixes3 libxkbcommon0 libxrandr2 libxshmfence1; \
    fi \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt requirements.lock ./
RUN python -c "import torch" 2>/dev/null || python -m pip install "torch>=2.4" --index-url "${TORCH_INDEX_URL}"; \
    python -c "import torch; print('torch==' + torch.__version__)" > /tmp/keep-base-torch.txt \
 && python -m pip install -r requirements.txt -c /tmp/keep-base-torch.txt -c requirements.lock \
 && python -c "import torch, sys; want = open('/tmp/keep-base-torch.txt').read().split('==')[1].strip(); \
sys.exit(0 if torch.__version__ == want else 'torch was replaced')"
RUN if ! command -v chromium >/dev/null; then \
      mkdir -p /opt/chrome && plotly_get_chrome -y --path /opt/chrome \
      && ln -s "$(find /opt/chrome -type f -name chrome | head -n 1)" /usr/local/bin/chromium; \
    fi

COPY . .
# The app runs as a user who cannot write here: compile its bytecode now, or every worker compiles it again.
RUN python -m compileall -q core render pages app.py \
 && useradd --create-home gpulab \
 && mkdir -p /data \
 && chown gpulab:gpulab /data
USER gpulab
VOLUME ["/data"]

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
  CMD python -c "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4); sys.exit(0 if r.read() == b'ok' else 1)"
CMD ["python", "-m", "streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501"]
