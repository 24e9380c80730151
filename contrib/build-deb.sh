#!/usr/bin/env bash
# Builds the Debian packages of slurm-squash from a `make dist` tarball:
#
#   contrib/build-deb.sh slurm-squash-VERSION.tar.gz [OUTDIR]
#
# Unpacks the tarball in a scratch directory, copies contrib/debian to
# debian/, runs `dpkg-buildpackage -us -uc -b` and moves the .deb (and the
# .buildinfo/.changes) to OUTDIR (default: the current directory). Needs the
# Build-Depends of contrib/debian/control (`dpkg-checkbuilddeps` names the
# missing ones) and builds against the Slurm installed here: the package
# only works with that Slurm major release. DEB_BUILD_OPTIONS is passed on
# (e.g. DEB_BUILD_OPTIONS=nocheck skips `make check`).
set -euo pipefail

die() { echo "build-deb.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 slurm-squash-VERSION.tar.gz [OUTDIR]"
tarball=$(readlink -f "$1")
outdir=$(readlink -f "${2:-.}")
[ -f "$tarball" ] || die "$1: no such file"
mkdir -p "$outdir"

base=$(basename "$tarball")
case "$base" in
slurm-squash-*.tar.gz) version=${base#slurm-squash-}; version=${version%.tar.gz} ;;
*) die "$base: expected slurm-squash-VERSION.tar.gz (from make dist)" ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/slurm-squash-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The Debian way: the tarball as NAME_VERSION.orig.tar.gz next to the tree.
ln -s "$tarball" "$work/slurm-squash_$version.orig.tar.gz"
tar -xzf "$tarball" -C "$work"
src=$work/slurm-squash-$version
[ -d "$src/contrib/debian" ] || die "$base has no contrib/debian"
cp -a "$src/contrib/debian" "$src/debian"

# The changelog names the version; it must be the tarball's.
deb_upstream=$(cd "$src" && dpkg-parsechangelog -S Version)
deb_upstream=${deb_upstream%-*}
deb_upstream=${deb_upstream#*:}
[ "$deb_upstream" = "$version" ] ||
	die "contrib/debian/changelog is for $deb_upstream, the tarball is $version: add a changelog entry (dch -v $version-1)"

(cd "$src" && dpkg-buildpackage -us -uc -b)

shopt -s nullglob
built=("$work"/*.deb "$work"/*.buildinfo "$work"/*.changes)
[ ${#built[@]} -gt 0 ] || die "dpkg-buildpackage made no .deb"
mv -f "${built[@]}" "$outdir/"
for f in "${built[@]}"; do echo "build-deb.sh: wrote $outdir/$(basename "$f")"; done
