#!/usr/bin/env bash
# Builds and tests cuda-workbench's JupyterLab extension on a clean Debian
# machine with Node 20 and npm: installs Debian's Chromium (Playwright's own
# browsers are never downloaded), installs the npm dependencies from the
# lockfile, builds the labextension into ../workbench/labextension, runs the
# Jest unit tests and the Playwright UI test (which starts its own JupyterLab).
#
# Needs the project venv active ($VIRTUAL_ENV) with jupyterlab>=4.2,<5,
# ipykernel and the workbench's own dependencies; run it as root or with sudo
# available when Chromium is not installed yet.
set -euo pipefail
cd "$(dirname "$0")"

log() { printf '\n=== extension/ci.sh: %s\n' "$*"; }

# --- Python side: the venv that runs JupyterLab and the kernel -------------
PYTHON="${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import jupyterlab, ipykernel' 2>/dev/null; then
    echo "extension/ci.sh: $PYTHON has no jupyterlab/ipykernel;" \
         "activate the project venv and pip install 'jupyterlab>=4.2,<5' ipykernel" >&2
    exit 1
fi
export JUPYTER_PYTHON="$PYTHON"

# --- Chromium from Debian ---------------------------------------------------
export CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM_PATH" ]; then
    log "installing Debian's chromium"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
"$CHROMIUM_PATH" --version 2>/dev/null

# --- npm dependencies, build, unit tests, UI test ---------------------------
log "npm ci"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
npm ci --no-audit --no-fund

log "build (production labextension into ../workbench/labextension)"
npm run build:prod

log "jest"
npx jest --ci

log "UI test (Playwright + $CHROMIUM_PATH)"
npx playwright test
