#!/usr/bin/env bash
# Docker on a machine that reaches the package registries but no image registry: starts dockerd if
# nothing answers (installing Debian's docker.io and debootstrap first where they are missing), and
# makes the image that stands in for Docker Hub's python:3.11-slim: Debian 12 (bookworm) minbase
# with Debian's Python 3.11, pip and venv, imported under that tag. docker/fresh_machine.sh and
# bench/tools/image.py call it; it does nothing where both are there already.
#
#   docker/base.sh             # dockerd up, the stand-in base built unless the tag exists
#   docker/base.sh --rebuild   # build the base again
#
# The stand-in differs from the real image in ways the project does not depend on: Debian's Python
# (3.11.2) rather than python.org's, under /usr/bin with /usr/local/bin/python and pip linked to it.
set -euo pipefail

TAG=python:3.11-slim
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { echo "[docker/base.sh] $*" >&2; }

need() {  # $1: a command, $2: the Debian package that has it
  command -v "$1" >/dev/null && return
  say "installing $2"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

need dockerd docker.io
need debootstrap debootstrap
if ! docker info >/dev/null 2>&1; then
  say "starting dockerd (log: /var/log/dockerd.log; stop it with: kill \$(cat /var/run/docker.pid))"
  setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { say "dockerd did not answer within a minute: see /var/log/dockerd.log"; exit 1; }
fi

if [ "${1:-}" != "--rebuild" ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  exit 0
fi
rootfs="$(mktemp -d)"
trap "rm -rf '$rootfs'" EXIT
say "building $TAG from Debian 12 (debootstrap, a few minutes)"
debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR" >/dev/null
ln -sf /usr/bin/python3 "$rootfs/usr/local/bin/python"
ln -sf /usr/bin/pip3 "$rootfs/usr/local/bin/pip"
rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED  # as in python:3.11-slim, pip installs system-wide
# This machine's CA bundle: where the registries are reached through a proxy, its certificate is in it.
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$TAG" >/dev/null
say "$TAG: $(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1 / 1e6}')"
