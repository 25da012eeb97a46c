#!/usr/bin/env bash
# Builds a stand-in for the Dockerfile's base image when no registry can be reached: Debian bookworm from its
# packages (debootstrap, minbase) with this machine's Node 20 and npm at the paths the official image uses, and
# its `node` user (uid 1000). Tagged with the official image's name, so the Dockerfile builds unchanged.
# Usage: scripts/container/standin-base.sh IMAGE_NAME
set -euo pipefail
image=${1:?usage: standin-base.sh IMAGE_NAME}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" = 20 ] || { echo "standin-base: this machine's Node is $major, the image wants 20" >&2; exit 1; }
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")

root=$(mktemp -d /var/tmp/pushd-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" >/dev/null
install -m 0755 "$(command -v node)" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules"
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
# The stand-in trusts what this machine trusts and keeps its npm settings: here the registry is reached through a
# proxy whose certificate only this machine's CA bundle holds. (nodedir points at headers the stand-in lacks.)
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
npmrc=$(npm config get globalconfig 2>/dev/null)
if [ -f "$npmrc" ]; then
  mkdir -p "$root/usr/local/etc"
  grep -v '^nodedir' "$npmrc" >"$root/usr/local/etc/npmrc"
fi
chroot "$root" /bin/sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

tar -C "$root" -c . | podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]' - "$image" >/dev/null
echo "standin-base: built $image from Debian bookworm and Node $(node --version)"
