#!/usr/bin/env bash
# Packaging test, run as root by tests/run.sh after the build:
#
#   1. `make dist`, then the .deb (contrib/build-deb.sh) and the RPM
#      (`rpmbuild --nodeps -ta` on the tarball; on the host release only,
#      not in the matrix's Debian roots) from that tarball;
#   2. checks what they hold: squashd, squashctl, spank_squash.so, the units,
#      the man pages, the config files (conffiles / %config(noreplace)), the
#      plugstack.conf.d snippet naming the packaged plugin, the NHC check,
#      the maintainer scripts (squashd enabled, the metrics timer not), and
#      the Slurm pinning (this machine's Slurm major.minor in the deb
#      version, the RPM release and the plugins' plugin_version symbol;
#      Depends/Requires on its libslurm), and that apt could install the
#      .deb here (simulated);
#   3. unpacks the .deb into a scratch root (`dpkg -x`, nothing is installed
#      on this machine), starts a throwaway cluster (tests/cluster/cluster.sh)
#      running the unpacked squashd and plugin, and runs a job as squser1
#      that reads a trusted image (kernel mount) and a user image (FUSE);
#      inside a throwaway root of tests/matrix (SQUASH_MATRIX_SUITE set) the
#      .deb is installed for real first and the job runs on the installed
#      files;
#   4. the NHC check and the metrics timer/cron commands from the package,
#      with stand-in squashctl programs and with the unpacked squashctl
#      (the latter skipped while squashctl has no `health`/`metrics`).
#
# Everything lives in one scratch directory that is removed, and the cluster
# stopped, on any exit. Environment: SQUASH_BUILD_DIR (default <repo>/build),
# SQUASH_KEEP_SCRATCH=1 keeps the scratch directory,
# SQUASH_TEST_DEB_CHECK=1 builds the .deb with its checks (make check under
# dpkg-buildpackage, as Debian's build daemons do; default nocheck: the
# suite's own make check ran already), SQUASH_TEST_DEB_OUTPUT=DIR copies
# the .deb to DIR (tests/run.sh: for tests/node, which installs it in a
# guest).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${SQUASH_BUILD_DIR:-$repo/build}" && pwd)
cluster_sh=$repo/tests/cluster/cluster.sh

[ "$(id -u)" = 0 ] || { echo "test_packages.sh: run as root" >&2; exit 1; }

scratch=$(mktemp -d /tmp/squash-pkgtest.XXXXXX)
chmod 0755 "$scratch"
cluster=$scratch/cluster
cluster_started=0
failures=0

cleanup() {
	local rc=$?
	if [ "$cluster_started" = 1 ]; then
		"$cluster_sh" stop "$cluster" >/dev/null 2>&1 || "$cluster_sh" stop "$cluster" || true
	fi
	if [ "${SQUASH_KEEP_SCRATCH:-0}" = 1 ]; then
		echo "test_packages.sh: scratch kept in $scratch"
	else
		rm -rf "$scratch"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
say() { echo "--- [$(( $(date +%s) - t0 )) s] $*"; }
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failures=$((failures + 1)); }
check() { # description command...
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
has_line() { grep -qxF -- "$2" <<<"$1"; }
has_text() { grep -qF -- "$2" <<<"$1"; }
lacks_text() { ! grep -qF -- "$2" <<<"$1"; }
fails() { ! "$@"; }
# plugin_slurm_version SO: the Slurm major.minor in the plugin's
# plugin_version symbol (SLURM_VERSION_NUMBER, which Slurm's loader checks).
plugin_slurm_version() {
	local addr bytes
	addr=$(nm -D --defined-only "$1" | awk '$3 == "plugin_version" { print $1 }')
	[ -n "$addr" ] || return 1
	bytes=$(objdump -s -j .rodata --start-address="0x$addr" \
		--stop-address="$(printf '0x%x' $((0x$addr + 4)))" "$1" | awk 'END { print $2 }')
	# little-endian uint32: micro minor major 00
	printf '%d.%02d\n' "0x${bytes:4:2}" "0x${bytes:2:2}"
}

# ---------------------------------------------------------------- expectations
# What this machine's Slurm is, found independently of the packaging's own
# detection: the Debian package versions.
# (libslurm38 on Debian 12; libslurm42t64, libslurm45t64 since the 64-bit
# time_t transition: the soname is the number)
libslurm_pkg=$(dpkg-query -W -f='${Depends}' libslurm-dev | grep -oE 'libslurm[0-9]+(t64)?' | head -n1)
slurm_deb_version=$(dpkg-query -W -f='${Version}' "$libslurm_pkg")
slurm_majmin=$(sed -E 's/^([0-9]+)\.([0-9]+).*/\1.\2/' <<<"$slurm_deb_version")
slurm_next=$(awk -F. '{ printf "%d.%02d", $1, $2 + 1 }' <<<"$slurm_majmin")
slurm_tag=${slurm_majmin/./}
libslurm_soname=${libslurm_pkg#libslurm}
libslurm_soname=libslurm.so.${libslurm_soname%t64}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb_plugin=/usr/lib/$multiarch/slurm-wlm/spank_squash.so
rpm_plugin=/usr/lib64/slurm/spank_squash.so
echo "test_packages.sh: Slurm here is $slurm_deb_version ($libslurm_pkg, $libslurm_soname): expecting sl$slurm_tag"

# ---------------------------------------------------------------- build
say "make dist"
make -s -C "$build" dist >/dev/null
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$build/Makefile")
tarball=$build/slurm-squash-$version.tar.gz
[ -f "$tarball" ] || { echo "test_packages.sh: $tarball not made" >&2; exit 1; }

deb_options="nocheck parallel=$(nproc)"
[ "${SQUASH_TEST_DEB_CHECK:-0}" = 1 ] && deb_options="parallel=$(nproc)"
say "building the .deb (contrib/build-deb.sh, DEB_BUILD_OPTIONS=\"$deb_options\")"
mkdir -p "$scratch/deb"
if ! DEB_BUILD_OPTIONS=$deb_options TMPDIR=$scratch \
	nice -n 10 "$repo/contrib/build-deb.sh" "$tarball" "$scratch/deb" >"$scratch/deb.log" 2>&1; then
	# The failed checks' own lines first: a listing in a message can
	# push them out of the tail.
	grep -E '^(FAIL|ERROR)[: ]' "$scratch/deb.log" | cut -c1-1500
	tail -n 40 "$scratch/deb.log"
	echo "test_packages.sh: the .deb did not build" >&2
	exit 1
fi
deb=$scratch/deb/slurm-squash_${version}-1+sl${slurm_tag}_$(dpkg --print-architecture).deb
check ".deb is named for Slurm $slurm_majmin: $(basename "$deb")" test -f "$deb"
[ -f "$deb" ] || { ls -l "$scratch/deb"; exit 1; }
if [ "${SQUASH_TEST_DEB_CHECK:-0}" = 1 ]; then
	check "dpkg-buildpackage ran make check: $(grep -m1 -E '^# PASS: ' "$scratch/deb.log" || echo 'no summary')" \
		grep -qE '^# PASS: +[1-9]' "$scratch/deb.log"
fi
if [ -n "${SQUASH_TEST_DEB_OUTPUT:-}" ]; then
	mkdir -p "$SQUASH_TEST_DEB_OUTPUT"
	rm -f "$SQUASH_TEST_DEB_OUTPUT"/slurm-squash_*.deb
	cp "$deb" "$SQUASH_TEST_DEB_OUTPUT/"
	echo "test_packages.sh: copied the .deb to $SQUASH_TEST_DEB_OUTPUT"
fi

# The RPM is for RPM distributions: it is built and checked on the host
# release only (Debian's rpmbuild); the matrix's Debian roots build and
# install the .deb (18 s each saved for the CI budget, tests/run.sh).
build_rpm=true
[ -n "${SQUASH_MATRIX_SUITE:-}" ] && build_rpm=false
if $build_rpm; then
say "building the RPM (rpmbuild --nodeps --nocheck -ta)"
# rpm keeps its database under the scratch directory too (on Debian its
# default is ~/.rpmdb).
rpmdb=(--dbpath "$scratch/rpmdb")
if ! nice -n 10 rpmbuild "${rpmdb[@]}" --define "_topdir $scratch/rpm" --nodeps --nocheck -ta "$tarball" \
	>"$scratch/rpm.log" 2>&1; then
	tail -n 40 "$scratch/rpm.log"
	echo "test_packages.sh: the RPM did not build" >&2
	exit 1
fi
rpmfile=$(find "$scratch/rpm/RPMS" -name "slurm-squash-$version-*.rpm" | head -n1)
check "RPM built: $(basename "${rpmfile:-none}")" test -n "$rpmfile"
[ -n "$rpmfile" ] || exit 1
else
	say "no RPM in the ${SQUASH_MATRIX_SUITE} root: built and checked on the host release"
fi

# ---------------------------------------------------------------- .deb contents
say "checking the .deb"
deb_files=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|')
for f in /usr/sbin/squashd /usr/bin/squashctl "$deb_plugin" \
	/lib/systemd/system/squashd.service /lib/systemd/system/squashd-metrics.service \
	/lib/systemd/system/squashd-metrics.timer /lib/systemd/system/squashd.socket \
	/usr/share/man/man8/squashd.8.gz /usr/share/man/man8/squashctl.8.gz \
	/usr/share/man/man8/spank_squash.8.gz /usr/share/man/man5/squashd.conf.5.gz \
	/etc/squashd.conf /etc/slurm/plugstack.conf.d/squash.conf \
	/usr/share/slurm-squash/nhc/squashd.nhc \
	/usr/share/doc/slurm-squash/examples/squashd-metrics.cron \
	/usr/share/doc/slurm-squash/examples/squash-images.conf.example; do
	check "deb has $f" has_line "$deb_files" "$f"
done
check "deb has no libtool .la" bash -c '! grep -q "\.la$" <<<"$1"' _ "$deb_files"
reader_mode=$(dpkg-deb -c "$deb" | awk '$6 ~ /\/slurm-squash\/squash-reader$/ { print $1 }')
check "deb's squash-reader is -rwx--x--x (users cannot read it: non-dumpable at exec)" \
	test "$reader_mode" = "-rwx--x--x"

deb_version=$(dpkg-deb -f "$deb" Version)
deb_depends=$(dpkg-deb -f "$deb" Depends)
check "deb version $deb_version ends in +sl$slurm_tag" test "${deb_version%+sl"$slurm_tag"}" != "$deb_version"
check "deb version $deb_version is configure's $version (NEWS.md)" test "${deb_version%%-*}" = "$version"
check "deb has NEWS.md" bash -c 'grep -qxE "/usr/share/doc/slurm-squash/NEWS\.md(\.gz)?" <<<"$1"' _ "$deb_files"
check "deb depends on $libslurm_pkg (>= $slurm_majmin~)" has_text "$deb_depends" "$libslurm_pkg (>= $slurm_majmin~)"
check "deb depends on $libslurm_pkg (<< $slurm_next~)" has_text "$deb_depends" "$libslurm_pkg (<< $slurm_next~)"
check "deb depends on slurm-wlm-basic-plugins of Slurm $slurm_majmin" \
	has_text "$deb_depends" "slurm-wlm-basic-plugins (<< $slurm_next~)"
check "deb depends on squashfuse and munge" \
	bash -c 'grep -qw squashfuse <<<"$1" && grep -qw munge <<<"$1"' _ "$deb_depends"

# Installable here, with nothing removed (apt's simulation changes nothing).
sim=$(apt-get install -s -q -o Debug::NoLocking=1 "$deb" 2>&1 || true)
check "apt can install the deb on this machine (simulated)" \
	bash -c 'grep -q "^Inst slurm-squash " <<<"$1" && ! grep -q "^Remv " <<<"$1"' _ "$sim"

dpkg-deb -e "$deb" "$scratch/deb/control"
conffiles=$(cat "$scratch/deb/control/conffiles")
check "deb conffile /etc/squashd.conf" has_line "$conffiles" /etc/squashd.conf
check "deb conffile /etc/slurm/plugstack.conf.d/squash.conf" has_line "$conffiles" /etc/slurm/plugstack.conf.d/squash.conf
postinst=$(cat "$scratch/deb/control/postinst")
check "deb postinst enables squashd.service" has_text "$postinst" "deb-systemd-helper enable 'squashd.service'"
check "deb postinst starts squashd.service" has_text "$postinst" "deb-systemd-invoke \$_dh_action 'squashd.service'"
check "deb postinst enables squashd.socket" has_text "$postinst" "deb-systemd-helper enable 'squashd.socket'"
check "deb postinst starts no metrics unit" bash -c '! grep -q "deb-systemd-invoke.*squashd-metrics" <<<"$1"' _ "$postinst"
check "deb postinst enables the metrics timer only if the admin did" \
	has_text "$postinst" "if deb-systemd-helper debian-installed 'squashd-metrics.timer'; then"

# ---------------------------------------------------------------- RPM contents
if $build_rpm; then
say "checking the RPM"
rpm_q() { rpm "${rpmdb[@]}" -qp "$@" "$rpmfile" 2>/dev/null; }
rpm_release=$(rpm_q --qf '%{RELEASE}')
check "RPM version is configure's $version (NEWS.md)" test "$(rpm_q --qf '%{VERSION}')" = "$version"
rpm_files=$(rpm_q -l)
rpm_requires=$(rpm_q --requires)
rpm_config=$(rpm_q --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' | awk '$1 ~ /c/ && $1 ~ /n/ { print $2 }')
rpm_scripts=$(rpm_q --scripts)
check "RPM release $rpm_release is 1.sl$slurm_tag" test "$rpm_release" = "1.sl$slurm_tag"
for f in /usr/sbin/squashd /usr/bin/squashctl "$rpm_plugin" \
	/usr/lib/systemd/system/squashd.service /usr/lib/systemd/system/squashd-metrics.timer \
	/usr/lib/systemd/system/squashd.socket \
	/usr/share/man/man8/squashd.8 /usr/share/man/man8/squashctl.8 \
	/usr/share/man/man8/spank_squash.8 /usr/share/man/man5/squashd.conf.5 \
	/etc/squashd.conf /etc/slurm/plugstack.conf.d/squash.conf \
	/usr/share/slurm-squash/nhc/squashd.nhc; do
	check "RPM has $f" grep -qxE -- "$f(\.gz|\.xz|\.bz2)?" <<<"$rpm_files"
done
rpm_reader_mode=$(rpm_q --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' | awk '$2 ~ /\/slurm-squash\/squash-reader$/ { print $1 }')
check "RPM's squash-reader is -rwx--x--x" test "$rpm_reader_mode" = "-rwx--x--x"
check "RPM requires $libslurm_soname()(64bit)" has_line "$rpm_requires" "$libslurm_soname()(64bit)"
check "RPM requires squashfuse and munge" \
	bash -c 'grep -qx squashfuse <<<"$1" && grep -qx munge <<<"$1"' _ "$rpm_requires"
check "RPM %config(noreplace) /etc/squashd.conf" has_line "$rpm_config" /etc/squashd.conf
check "RPM %config(noreplace) plugstack.conf.d/squash.conf" has_line "$rpm_config" /etc/slurm/plugstack.conf.d/squash.conf
check "RPM scriptlets handle squashd.service (post, preun, restart on upgrade)" \
	bash -c 'grep -q "preset squashd.service" <<<"$1" && grep -q "disable --now squashd.service" <<<"$1" && grep -q "try-restart squashd.service" <<<"$1"' _ "$rpm_scripts"
check "RPM scriptlets handle squashd.socket (post, preun)" \
	bash -c 'grep -q "preset squashd.service squashd.socket" <<<"$1" && grep -q "disable --now squashd.service squashd.socket" <<<"$1"' _ "$rpm_scripts"
mkdir -p "$scratch/rpmroot"
rpm2archive - <"$rpmfile" | tar -xzf - -C "$scratch/rpmroot"
check "RPM plugin is built for Slurm $slurm_majmin (plugin_version)" \
	test "$(plugin_slurm_version "$scratch/rpmroot$rpm_plugin")" = "$slurm_majmin"
check "RPM snippet loads $rpm_plugin" \
	grep -qx "required $rpm_plugin .*" "$scratch/rpmroot/etc/slurm/plugstack.conf.d/squash.conf"
fi

# ---------------------------------------------------------------- scratch root
say "unpacking the .deb into a scratch root"
root=$scratch/root
mkdir -p "$root"
dpkg -x "$deb" "$root"
chmod 0755 "$root"
check "deb snippet loads the packaged plugin $deb_plugin" \
	grep -qx "required $deb_plugin .*" "$root/etc/slurm/plugstack.conf.d/squash.conf"
check "deb unit runs /usr/sbin/squashd" grep -q '^ExecStart=/usr/sbin/squashd$' "$root/lib/systemd/system/squashd.service"
check "deb metrics unit runs /usr/bin/squashctl metrics" \
	grep -q '/usr/bin/squashctl metrics' "$root/lib/systemd/system/squashd-metrics.service"
check "packaged plugin is built for Slurm $slurm_majmin (plugin_version)" \
	test "$(plugin_slurm_version "$root$deb_plugin")" = "$slurm_majmin"
check "packaged plugin does not link libslurm (hence the explicit pin)" \
	bash -c '! objdump -p "$1" | grep -q "NEEDED.*libslurm"' _ "$root$deb_plugin"
check "unpacked squashctl runs" bash -c '"$1" --help >/dev/null' _ "$root/usr/bin/squashctl"
check "packaged squashd --version names $version, protocol and state file format" \
	bash -c '"$1" --version | grep -q "^squashd $2, built for Slurm .*; protocol [0-9]*, state file format [0-9]*$"' \
	_ "$root/usr/sbin/squashd" "$version"
check "packaged /etc/squashd.conf is 0644" test "$(stat -c %a "$root/etc/squashd.conf")" = 644

# ---------------------------------------------------------------- a job
export SQUASH_SQUASHD=$root/usr/sbin/squashd
export SQUASH_SQUASHCTL=$root/usr/bin/squashctl
export SQUASH_PLUGIN=$root$deb_plugin
# In a throwaway root of tests/matrix (its writes vanish with it) the .deb
# is installed for real, offline (every dependency is there), and the job
# runs on the installed files; elsewhere nothing is installed here.
if [ -n "${SQUASH_MATRIX_SUITE:-}" ]; then
	say "installing the .deb (throwaway root of tests/matrix: $SQUASH_MATRIX_SUITE)"
	inst=$(DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$deb" 2>&1) || true
	check "apt installs the deb in this root" \
		test "$(dpkg-query -W -f='${Status} ${Version}' slurm-squash 2>/dev/null)" = "install ok installed $deb_version"
	if grep -q '^E:' <<<"$inst"; then echo "$inst" | tail -n 20; fi
	check "installed plugin is the packaged one" cmp -s "$deb_plugin" "$root$deb_plugin"
	[ -x /usr/sbin/squashd ] || exit 1
	export SQUASH_SQUASHD=/usr/sbin/squashd SQUASH_SQUASHCTL=/usr/bin/squashctl SQUASH_PLUGIN=$deb_plugin
fi
say "starting a throwaway cluster on the unpacked files"
cluster_started=1
"$cluster_sh" start "$cluster"
pid=$(cat "$cluster/run/squashd.pid")
check "the running squashd is the packaged one" test "$(readlink "/proc/$pid/exe")" = "$SQUASH_SQUASHD"
check "slurm loads the packaged plugin" grep -q "^required $SQUASH_PLUGIN " "$cluster/plugstack.conf"

say "running a job with a trusted and a user image"
work=$cluster/work/pkg
mkdir -p "$work/src-app" "$work/src-data"
echo "app from the trusted image" >"$work/src-app/app.txt"
echo "data from the user image" >"$work/src-data/data.txt"
mksquashfs "$work/src-app" "$cluster/trusted/app.sqfs" -noappend -quiet -no-progress -all-root
chmod 0644 "$cluster/trusted/app.sqfs"
mksquashfs "$work/src-data" "$work/data.sqfs" -noappend -quiet -no-progress -all-root
cat >"$work/job.sh" <<'JOB'
#!/bin/bash
cat /squash/app/app.txt /squash/input/data.txt
awk '$5 == "/squash/app" || $5 == "/squash/input" { print "mount", $5, $(NF-2) }' /proc/self/mountinfo
JOB
chmod 0755 "$work/job.sh"
chown -R squser1: "$work"
rc=0
(cd "$work" && timeout 120 runuser -u squser1 -- env SLURM_CONF="$cluster/slurm.conf" \
	sbatch --wait -o "$work/job.out" \
	--squash-image="$cluster/trusted/app.sqfs:/squash/app,$work/data.sqfs:/squash/input" \
	"$work/job.sh") || rc=$?
out=$(cat "$work/job.out" 2>/dev/null || true)
echo "$out" | sed 's/^/    job: /'
check "job exited 0" test "$rc" = 0
check "job read the trusted image" has_line "$out" "app from the trusted image"
check "job read the user image" has_line "$out" "data from the user image"
check "trusted image on a kernel squashfs mount" has_line "$out" "mount /squash/app squashfs"
check "user image on a FUSE mount" bash -c 'grep -qE "^mount /squash/input fuse" <<<"$1"' _ "$out"
ctl=("$SQUASH_SQUASHCTL" --socket "$cluster/squashd.sock" --munge-socket "$cluster/munge.sock")
check "packaged squashctl: no mounts left after the job" \
	bash -c '[ "$("$@" list --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)[\"mounts\"]))")" = 0 ]' _ "${ctl[@]}"

# ---------------------------------------------------------------- NHC check
say "NHC check (contrib/nhc/squashd.nhc) with stand-in squashctl programs"
nhc=$root/usr/share/slurm-squash/nhc/squashd.nhc
fake=$scratch/fake
mkdir -p "$fake"
# run_nhc ARGS...: runs check_squashd in a bash with NHC's die/log stand-ins;
# prints "rc=N", then the die/log calls.
run_nhc() {
	bash -c '
		die() { echo "die $1 $2"; }
		log() { echo "log $*"; }
		. "$0"
		check_squashd "$@"
		echo "rc=$?"' "$nhc" "$@"
}
mkfake() { # name exit-code stdout-text [stderr-text]
	printf '#!/bin/sh\necho "$*" > "%s/%s.args"\nprintf "%%b" "%s"\nprintf "%%b" "%s" >&2\nexit %s\n' \
		"$fake" "$1" "$3" "${4:-}" "$2" >"$fake/$1"
	chmod 0755 "$fake/$1"
}
mkfake healthy 0 ""
mkfake sick 1 'squashd not answering at /run/squashd/squashd.sock\nregistry not saved: disk full\n'
mkfake stderr-only 3 "" 'squashctl: cannot connect\n'
mkfake silent 4 ""
r=$(run_nhc -c "$fake/healthy" -s /x/sock)
check "NHC: healthy squashd passes" test "$r" = "rc=0"
check "NHC: passes --timeout 10 --socket before health" test "$(cat "$fake/healthy.args")" = "--timeout 10 --socket /x/sock health"
r=$(run_nhc -c "$fake/sick")
check "NHC: first problem line is the drain reason" has_line "$r" "die 1 squashd: squashd not answering at /run/squashd/squashd.sock"
check "NHC: other problem lines are logged" has_line "$r" "log check_squashd:  also: registry not saved: disk full"
check "NHC: a failed check returns 1" has_line "$r" "rc=1"
r=$(run_nhc -c "$fake/stderr-only" -t 3)
check "NHC: stderr used when stdout is empty" has_line "$r" "die 1 squashd: squashctl: cannot connect"
check "NHC: -t sets squashctl's timeout" test "$(cat "$fake/stderr-only.args")" = "--timeout 3 health"
r=$(run_nhc -c "$fake/silent")
check "NHC: silent failure names the exit code" has_line "$r" "die 1 squashd: squashctl health failed (exit 4)"
r=$(run_nhc -c "$scratch/no-such-squashctl")
check "NHC: missing squashctl fails the check" has_line "$r" "die 1 squashd: squashctl not found at $scratch/no-such-squashctl"

# The packaged squashctl against the cluster (munge socket of the instance).
cat >"$fake/real" <<EOF
#!/bin/sh
exec "$SQUASH_SQUASHCTL" --munge-socket "$cluster/munge.sock" "\$@"
EOF
chmod 0755 "$fake/real"
# lacks_command CMD: the packaged squashctl does not know CMD (usage text).
lacks_command() {
	local out
	out=$("$fake/real" --socket "$cluster/squashd.sock" "$1" 2>&1 || true)
	grep -q '^Usage:' <<<"$out"
}
if lacks_command health; then
	echo "skip NHC with the packaged squashctl: it has no 'health' command yet"
else
	say "NHC check with the packaged squashctl"
	r=$(run_nhc -c "$fake/real" -s "$cluster/squashd.sock")
	check "NHC: the running packaged squashd is healthy" test "$r" = "rc=0"
	"$cluster_sh" squashd-stop "$cluster"
	r=$(run_nhc -c "$fake/real" -s "$cluster/squashd.sock")
	check "NHC: a stopped squashd drains with 'squashd: ...'" bash -c 'grep -q "^die 1 squashd: ." <<<"$1"' _ "$r"
	echo "$r" | sed 's/^/    /'
	"$cluster_sh" squashd-start "$cluster"
fi

# ---------------------------------------------------------------- metrics
say "metrics timer and cron commands from the package"
# The service's ExecStart with systemd's $$ unescaped, and the cron command.
unit_cmd=$(sed -n "s/^ExecStart=\/bin\/sh -c '\(.*\)'$/\1/p" "$root/lib/systemd/system/squashd-metrics.service" | sed 's/\$\$/$/g')
cron_cmd=$(sed -n 's/^\* \* \* \* \* root //p' "$root/usr/share/doc/slurm-squash/examples/squashd-metrics.cron")
check "metrics: service and cron commands found" test -n "$unit_cmd" -a -n "$cron_cmd"
mkfake metrics-ok 0 '# TYPE squashd_up gauge\nsquashd_up 1\n'
mkfake metrics-bad 1 'squashd_partial 1\n' 'squashd not answering\n'
run_metrics() { # unit|cron squashctl dir
	local cmd
	if [ "$1" = unit ]; then cmd=$unit_cmd; else cmd=$cron_cmd; fi
	cmd=${cmd//\/usr\/bin\/squashctl/$2}
	cmd=${cmd//\/var\/lib\/node_exporter\/textfile_collector/$3}
	TEXTFILE_DIR=$3 sh -c "$cmd" >/dev/null 2>&1
}
for kind in unit cron; do
	d=$scratch/textfile-$kind
	mkdir -p "$d"
	check "metrics ($kind): a good run succeeds" run_metrics $kind "$fake/metrics-ok" "$d"
	check "metrics ($kind): squashd.prom holds the metrics" grep -qx 'squashd_up 1' "$d/squashd.prom"
	# (cron only mails what fails; the unit must fail to show in systemctl --failed)
	if [ $kind = unit ]; then
		check "metrics ($kind): a failed run fails" fails run_metrics $kind "$fake/metrics-bad" "$d"
	else
		run_metrics $kind "$fake/metrics-bad" "$d" || true
	fi
	check "metrics ($kind): a failed run keeps the last good file" grep -qx 'squashd_up 1' "$d/squashd.prom"
	check "metrics ($kind): no temporary files left" test "$(ls "$d")" = squashd.prom
done
if lacks_command metrics; then
	echo "skip metrics with the packaged squashctl: it has no 'metrics' command yet"
else
	cat >"$fake/real-metrics" <<EOF
#!/bin/sh
exec "$SQUASH_SQUASHCTL" --socket "$cluster/squashd.sock" --munge-socket "$cluster/munge.sock" "\$@"
EOF
	chmod 0755 "$fake/real-metrics"
	d=$scratch/textfile-real
	mkdir -p "$d"
	check "metrics: the unit's command with the packaged squashctl" run_metrics unit "$fake/real-metrics" "$d"
	check "metrics: squashd.prom has Prometheus text" grep -q '^# TYPE ' "$d/squashd.prom"
fi

say "stopping the cluster"
"$cluster_sh" stop "$cluster"
cluster_started=0
check "no mounts left under the scratch directory" bash -c '! grep -qF " $1/" /proc/self/mountinfo' _ "$scratch"

echo
if [ "$failures" -gt 0 ]; then
	echo "test_packages.sh: $failures check(s) FAILED ($(( $(date +%s) - t0 )) s)"
	exit 1
fi
echo "test_packages.sh: all checks passed ($(( $(date +%s) - t0 )) s)"
