#!/usr/bin/env bash
# One version, defined once (configure.ac's AC_INIT, PACKAGE_VERSION): what
# squashd --version, NEWS.md's newest entry and the
# Debian changelog say (the RPM spec takes it from configure). Run by make
# check from the build's tests/ directory; under a second.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/../..
build=${SQUASH_TEST_BUILD:-$PWD/..}
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$build/config.h")
[ -n "$version" ] || { echo "FAIL: no PACKAGE_VERSION in $build/config.h" >&2; exit 1; }
echo "PACKAGE_VERSION: $version"

out=$("$build/daemon/squashd" --version) || fail "squashd --version failed"
case $out in
"squashd $version, built for Slurm "*"; protocol "[0-9]*", state file format "[0-9]*) ;;
*) fail "squashd --version says '$out', not version $version with protocol and state file format" ;;
esac

news=$(sed -n 's/^## \([0-9][0-9.]*\)\( .*\)\{0,1\}$/\1/p' "$src/NEWS.md" | head -n1)
[ "$news" = "$version" ] || fail "NEWS.md's newest entry is '$news', configure says $version"

deb=$(sed -n '1s/^slurm-squash (\([^-)]*\)-[^)]*).*/\1/p' "$src/contrib/debian/changelog")
[ "$deb" = "$version" ] || fail "contrib/debian/changelog's newest entry is '$deb', configure says $version"

grep -q '^Version: *@PACKAGE_VERSION@$' "$src/contrib/rpm/slurm-squash.spec.in" ||
	fail "the RPM spec's Version is not @PACKAGE_VERSION@"
grep -q '^\* .* - @PACKAGE_VERSION@-1$' "$src/contrib/rpm/slurm-squash.spec.in" ||
	fail "the RPM spec's newest changelog entry is not @PACKAGE_VERSION@-1"

# squash-pack is a script installed as it is: it says its version itself
# (in the images' metadata).
pack=$(sed -n 's/^squash_pack_version=\(.*\)$/\1/p' "$src/contrib/squash-pack")
[ "$pack" = "$version" ] || fail "contrib/squash-pack's squash_pack_version is '$pack', configure says $version"

[ "$failures" = 0 ] && echo "ok: $version everywhere"
exit $((failures > 0))
