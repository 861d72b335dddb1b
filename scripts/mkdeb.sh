#!/usr/bin/env bash
# Builds the strata .deb from an existing release build with dpkg-deb (no rebuild, no debhelper).
# Usage: scripts/mkdeb.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, build/deb)
# Packaging files: deploy/debian/ (unit, properties, maintainer scripts). `make deb` runs this.
# Prints the path of the .deb it wrote.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
out=${2:-$build/deb}
deb=$src/deploy/debian
for b in strata-server strata; do
  [ -x "$build/$b" ] || { echo "mkdeb: $build/$b is missing (make release first)" >&2; exit 1; }
done
version=$(sed -n 's/^project(strata VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)
stage=$(mktemp -d "${TMPDIR:-/tmp}/strata-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root
install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/strata" \
  "$root/usr/share/doc/strata"
install -m 0755 -s "$build/strata-server" "$build/strata" "$root/usr/bin/"
install -m 0644 "$deb/strata.service" "$root/lib/systemd/system/strata.service"
install -m 0644 "$deb/strata.properties" "$root/etc/strata/strata.properties"
install -m 0644 "$src/README.md" "$src/docs/deploy.md" "$root/usr/share/doc/strata/"
install -m 0755 "$deb/postinst" "$deb/prerm" "$deb/postrm" "$root/DEBIAN/"
echo /etc/strata/strata.properties >"$root/DEBIAN/conffiles"

# Shared-library dependencies of the two binaries, as dpkg-shlibdeps finds them (it wants a
# debian/control to sit in; a minimal one in the stage does).
mkdir -p "$stage/debian"
printf 'Source: strata\n\nPackage: strata\nArchitecture: any\n' >"$stage/debian/control"
shdeps=$(cd "$stage" && dpkg-shlibdeps -O -xstrata "root/usr/bin/strata-server" \
  "root/usr/bin/strata" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
# The controller needs libraft 0.22 (bookworm-backports; 0.15 has a commit-rule bug), whatever
# symbols the binary happens to use.
shdeps=$(echo "$shdeps" | sed 's/libraft0 ([^)]*)/libraft0 (>= 0.22.1)/')
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CTL
Package: strata
Version: $version
Architecture: $arch
Maintainer: Strata developers <strata@localhost>
Installed-Size: $size
Depends: ${shdeps:+$shdeps, }adduser
Section: net
Priority: optional
Description: Kafka-protocol log broker
 Strata is a streaming log broker in C that speaks the Apache Kafka wire protocol:
 topics, partitions, consumer groups, replication through a Raft controller quorum,
 transactions, TLS and SASL. Thread-per-core on io_uring.
 .
 This package installs strata-server (the broker, run by strata.service with
 /etc/strata/strata.properties, data in /var/lib/strata) and the strata tool.
CTL
mkdir -p "$out"
f="$out/strata_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$f" >/dev/null
echo "$f"
