#!/usr/bin/env bash
# Installs Debian's chromium for the approvals page's browser test, when it is
# missing. Used by `make browser` (and so by `make test` and CI).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
fi
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
