#!/usr/bin/env bash
# Turns a staged install (`make install DESTDIR=ROOT PREFIX=/usr`) into a
# Debian package with dpkg-deb: the control file from deploy/debian/control
# (Depends from dpkg-shlibdeps on the staged binary), the maintainer scripts
# from deploy/debian/, md5sums, lintian's overrides. The package ships no
# file in /etc (so it has no conffiles): postinst creates /etc/siwa/*.env
# from the examples on first install and never touches them again, so an
# upgrade that adds a setting brings no dpkg prompt. Called by `make deb`.
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

# The debug information goes (the symbol table stays, for the Swift
# runtime's crash backtraces: see deploy/debian/lintian-overrides).
strip --strip-debug "$root/usr/bin/siwa"

# The settings are postinst's to create (from /usr/share/siwa/examples, which
# no dpkg path-exclude drops, as one may /usr/share/doc), not the package's.
rm -rf "$root/etc"

# Documentation Debian expects: the license as copyright, how to start, the
# changelogs (compressed), the examples where an operator looks for them.
# The guides (docs/, deploy/README.md) stay as make install laid them out,
# uncompressed, so that their links to each other hold.
doc="$root/usr/share/doc/siwa"
install -d "$doc"
install -m 0644 deploy/debian/README.Debian "$doc/README.Debian"
{
    printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: siwa\n\n'
    printf 'Files: *\nCopyright: 2025-2026 the siwa authors\nLicense: Apache-2.0\n'
    printf ' On Debian systems, the full text of the Apache License, Version 2.0 is in\n /usr/share/common-licenses/Apache-2.0.\n'
} > "$doc/copyright"
chmod 0644 "$doc/copyright"
rm -f "$doc/LICENSE"
if [[ -f $doc/CHANGELOG.md ]]; then mv "$doc/CHANGELOG.md" "$doc/changelog"; gzip -9nf "$doc/changelog"; fi
# Debian's own changelog: one entry per version, as dpkg-deb packages have none.
date=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
printf 'siwa (%s) unstable; urgency=medium\n\n  * siwa %s: see /usr/share/doc/siwa/changelog.gz.\n\n -- %s  %s\n' \
    "$version" "$version" "$maintainer" "$date" | gzip -9n > "$doc/changelog.Debian.gz"
chmod 0644 "$doc"/*.gz
ln -sfn ../../siwa/examples "$doc/examples"
install -d "$root/usr/share/lintian/overrides"
install -m 0644 deploy/debian/lintian-overrides "$root/usr/share/lintian/overrides/siwa"

install -d "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
    -e "s|@INSTALLED_SIZE@|$size|" -e "s|@SHLIBS@|$shlibs|" deploy/debian/control > "$root/DEBIAN/control"
for script in preinst postinst prerm postrm; do install -m 0755 "deploy/debian/$script" "$root/DEBIAN/$script"; done
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"

mkdir -p "$(dirname "$output")"
# Owned by root whoever builds it; the files keep their modes (settings 0600).
dpkg-deb --root-owner-group -Zxz --build "$root" "$output" >/dev/null
echo "$output"
