#!/usr/bin/env bash
# Turns a staged install (`make install DESTDIR=ROOT PREFIX=/usr`) into a
# Debian package with dpkg-deb: the control file from deploy/debian/control
# (Depends from dpkg-shlibdeps on the staged binary), the maintainer scripts
# from deploy/debian/, /etc/siwa/* as conffiles, md5sums. Called by `make deb`.
#
#   scripts/make-deb.sh ROOT VERSION ARCH OUTPUT.deb
set -euo pipefail
cd "$(dirname "$0")/.."

root=$1 version=$2 arch=$3 output=$4
maintainer=${DEB_MAINTAINER:-"siwa maintainers <root@localhost>"}
[[ -x "$root/usr/bin/siwa" ]] || { echo "make-deb: $root/usr/bin/siwa is missing (make install DESTDIR=$root PREFIX=/usr)" >&2; exit 1; }
[[ -n "$version" ]] || { echo "make-deb: no version" >&2; exit 1; }

binary=$(realpath "$root/usr/bin/siwa")
# A server has no Swift installed: the binary must carry the Swift runtime
# (--static-swift-stdlib). DEB_ALLOW_SWIFT_RUNTIME=1 lets CI's package test
# pack its debug build, which links the toolchain's.
ignore=()
if ldd "$binary" | grep -q 'libswiftCore\.so'; then
    [[ ${DEB_ALLOW_SWIFT_RUNTIME:-} == 1 ]] || { echo "make-deb: $binary links the Swift runtime dynamically (build it with --static-swift-stdlib)" >&2; exit 1; }
    ignore=(--ignore-missing-info)
fi

# The libraries the binary links, as packages (libc6, libstdc++6, libgcc-s1,
# zlib1g for a binary with the static Swift standard library); dpkg-shlibdeps
# wants a debian/control to read, so it runs in a scratch directory.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/debian"
printf 'Source: siwa\n\nPackage: siwa\nArchitecture: any\n' > "$scratch/debian/control"
shlibs=$(cd "$scratch" && dpkg-shlibdeps "${ignore[@]}" -O -e"$binary" | sed -n 's/^shlibs:Depends=//p')
[[ -n "$shlibs" ]] || { echo "make-deb: dpkg-shlibdeps found no libraries for $binary" >&2; exit 1; }

# Documentation Debian expects: the license as copyright, and how to start.
doc="$root/usr/share/doc/siwa"
install -d "$doc"
install -m 0644 deploy/debian/README.Debian "$doc/README.Debian"
{ printf 'siwa %s\n\nLicensed under the Apache License, Version 2.0 (below; also /usr/share/common-licenses/Apache-2.0).\n\n' "$version"; cat LICENSE; } > "$doc/copyright"
chmod 0644 "$doc/copyright"

install -d "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s|@INSTALLED_SIZE@|$size|" -e "s|@SHLIBS@|$shlibs|" deploy/debian/control > "$root/DEBIAN/control"
for script in postinst prerm postrm; do install -m 0755 "deploy/debian/$script" "$root/DEBIAN/$script"; done
# Every file in /etc is the operator's once installed: dpkg keeps their
# edits on upgrade and asks before replacing one.
(cd "$root" && find etc -type f | sort | sed 's|^|/|') > "$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"

mkdir -p "$(dirname "$output")"
# Owned by root whoever builds it; the files keep their modes (settings 0600).
dpkg-deb --root-owner-group -Zxz --build "$root" "$output" >/dev/null
echo "$output"
