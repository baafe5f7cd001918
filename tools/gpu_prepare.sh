#!/usr/bin/env bash
# tools/gpu_prepare.sh: fills the git-ignored .gpu/ for the device tool: the kit's packages
# (../shared/device/prepare.sh) plus those graft needs beyond them (jansson, ICU).
set -eu
cd "$(dirname "$0")/.."
../shared/device/prepare.sh
cd .gpu
extra="libjansson4 libjansson-dev libicu72 libicu-dev"
missing=""
for p in $extra; do ls "${p}"_*.deb >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    apt-get download $missing >/dev/null 2>&1 || { apt-get update -qq && apt-get download $missing; }
fi
echo "ready: $(ls ./*.deb | wc -l) packages in .gpu/ ($(du -sh . | cut -f1))"
