#!/usr/bin/env bash
# The real-node harness (issue 29): for each Debian release, the project's
# .deb installed with apt on a booted Debian guest with systemd as PID 1 and
# cgroup v2, configured as docs/admin.md tells an admin, and the cases of
# tests/node/guest.sh run there.
#
#   tests/node/run.sh [SUITE...]      default: bookworm trixie
#
# Per release:
#   1. the .deb, built with dpkg-buildpackage: taken from
#      $SQUASH_NODE_DEBS/SUITE/ when the packaging step of tests/run.sh
#      already put it there, otherwise built here (with its checks) from
#      `make dist`: on this machine when it runs that release, else inside
#      the release's root of tests/matrix; the .debs first, one after the
#      other;
#   2. the guest image (tests/node/build-guest.sh, cached in
#      /var/cache/slurm-squash/guests);
#   3. QEMU boots it (KVM when it can run the guest's kernel, else TCG),
#      the disk as a snapshot (the cached image is never written), files in
#      and out through a 9p share; the guest runs guest.sh at boot, reboots
#      once in the middle (SQUASH_NODE_REBOOT) and powers off at the end;
#   4. the results (one line per case) are checked here.
# The releases' guests run at once (steps 2-4; each line of their output
# marked with the release): QEMU's software CPU is one host thread per
# guest, so on 2 cores two guests take as long as the longer one alone
# (SQUASH_NODE_SEQUENTIAL=1: one after the other).
#
# Artifacts: $SQUASH_BUILD_DIR/node/SUITE/ (console.log, out/results,
# out/case-*.log, out/journal-boot*.txt); their path and the tail are printed
# on failure. QEMU is killed, and nothing else is left, on any exit.
# Environment: SQUASH_BUILD_DIR (default <repo>/build), SQUASH_NODE_DEBS
# (default $SQUASH_BUILD_DIR/debs), SQUASH_NODE_ACCEL (kvm or tcg: skip the
# probe), SQUASH_NODE_TIMEOUT (seconds per guest, default 900),
# SQUASH_NODE_REBOOT (the suites whose guest reboots in the middle of its
# run and checks what a reboot leaves: default the last suite named, the
# newest; each boot costs about a minute under TCG), SQUASH_NODE_ALL_CASES
# (the suites whose guest also runs the cases of the product's own logic,
# which do not depend on the release and run on the host too: dataset,
# catalog_env, packed_at_target, health_metrics; default the first suite
# named, so that they and the reboot share the guests' minutes when two
# run at once; the others run only the cases that meet the release's
# systemd, Slurm, kernel and libfuse), SQUASH_NODE_DROPIN (diagnosis only: lines for a [Service] drop-in of
# squashd.service in the guest, e.g. "RestrictNamespaces=no").
# Hold /tmp/squash-cluster.lock around it when others share the machine.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${SQUASH_BUILD_DIR:-$repo/build}
debs=${SQUASH_NODE_DEBS:-$build/debs}
guest_timeout=${SQUASH_NODE_TIMEOUT:-900}
[ $# -gt 0 ] || set -- bookworm trixie
# The guests that reboot in the middle of their run (the reboot cases):
# default the last one named, the newest release.
reboot_suites=${SQUASH_NODE_REBOOT-${!#}}
# The guests that also run the release-independent cases: default the
# first one named. The guests run at once and the step lasts as long as
# the longer: with these cases and the reboot on one guest it ran 580 s
# against the other's 350 s.
all_cases_suites=${SQUASH_NODE_ALL_CASES-$1}

die() { echo "tests/node/run.sh: $*" >&2; exit 1; }
say() { echo "--- [node ${suite:-}] $*"; }
[ "$(id -u)" = 0 ] || die "run as root"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found: run contrib/install-deps.sh"

qemu_pid=
tmpdirs=()
cleanup() {
	if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
		kill "$qemu_pid" 2>/dev/null
		sleep 1
		kill -9 "$qemu_pid" 2>/dev/null
	fi
	[ ${#tmpdirs[@]} = 0 ] || rm -rf "${tmpdirs[@]}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")

# deb_for SUITE: prints the path of the release's .deb, building it (with
# checks) when the packaging step did not leave one.
deb_for() {
	local s=$1 dir=$debs/$1 tarball version
	local found
	found=$(ls "$dir"/slurm-squash_*.deb 2>/dev/null | head -n 1)
	if [ -n "$found" ]; then
		echo "$found"
		return 0
	fi
	mkdir -p "$dir"
	if [ "$s" = "$host_suite" ]; then
		make -s -C "$build" dist >/dev/null || return 1
		version=$(sed -n 's/^PACKAGE_VERSION = //p' "$build/Makefile")
		tarball=$build/slurm-squash-$version.tar.gz
		DEB_BUILD_OPTIONS="parallel=$(nproc)" nice -n 10 \
			"$repo/contrib/build-deb.sh" "$tarball" "$dir" >"$dir/build.log" 2>&1 ||
			{ tail -n 40 "$dir/build.log" >&2; return 1; }
	else
		# In the release's root: its own autoconf, compiler and Slurm; the
		# .deb lands in $dir on this machine (SQUASH_MATRIX_OUTPUT).
		SQUASH_MATRIX_OUTPUT=$dir "$repo/tests/matrix/run-in-root.sh" "$s" bash -c '
			set -e
			autoreconf -fi >/dev/null 2>&1
			mkdir -p "$SQUASH_BUILD_DIR" && cd "$SQUASH_BUILD_DIR"
			"$OLDPWD/configure" >/dev/null
			make -s dist >/dev/null
			DEB_BUILD_OPTIONS="parallel=$(nproc)" nice -n 10 \
				"$OLDPWD/contrib/build-deb.sh" slurm-squash-*.tar.gz "$1"' deb "$dir" >"$dir/build.log" 2>&1 ||
			{ tail -n 40 "$dir/build.log" >&2; return 1; }
	fi
	found=$(ls "$dir"/slurm-squash_*.deb 2>/dev/null | head -n 1)
	[ -n "$found" ] && echo "$found"
}

# accel GUEST_DIR: kvm when a KVM guest gets through the kernel's early
# boot, else tcg. This machine's /dev/kvm is a paravirtual one that cannot
# run a stock Debian kernel, so it is tried, not assumed (about 10 s).
accel=${SQUASH_NODE_ACCEL:-}
probe_accel() {
	local g=$1 log
	[ -n "$accel" ] && return 0
	accel=tcg
	[ -w /dev/kvm ] || return 0
	log=$(mktemp /tmp/squash-node-kvm.XXXXXX)
	tmpdirs+=("$log")
	# No root disk: the kernel panics at mounting root, and with panic=-1
	# and -no-reboot QEMU then exits. A kernel that got that far on KVM
	# printed "Kernel panic" or at least "Linux version".
	# (In a subshell: QEMU aborts there, and bash's "Aborted" goes with its stderr.)
	(timeout 30 qemu-system-x86_64 -accel kvm -cpu host -m 256 -smp 1 -no-reboot \
		-display none -serial "file:$log" -nic none -no-user-config -nodefaults \
		-kernel "$g/vmlinuz" -append "console=ttyS0 panic=-1 root=/dev/nonexistent"; :) >/dev/null 2>&1
	if grep -q 'Kernel panic\|VFS: Unable to mount root' "$log"; then
		accel=kvm
	fi
	echo "tests/node/run.sh: accelerator: $accel ($(grep -c . "$log") console lines on the KVM probe)"
}

run_suite() {
	local deb g art share t0 t_boot rc=0 results expected missing
	t0=$(date +%s)
	say "the .deb (dpkg-buildpackage)"
	deb=$(deb_for "$suite") || { echo "FAIL $suite: the .deb did not build"; return 1; }
	say "$deb ($(( $(date +%s) - t0 )) s)"
	g=$("$repo/tests/node/build-guest.sh" "$suite" | tail -n 1) || { echo "FAIL $suite: no guest image"; return 1; }
	say "guest $g ($(( $(date +%s) - t0 )) s)"
	probe_accel "$g"

	art=$build/node/$suite
	share=$art/share
	rm -rf "$art"
	mkdir -p "$share/deb" "$share/out"
	cp "$deb" "$share/deb/"
	cp "$repo/tests/node/guest.sh" "$share/guest.sh"
	[[ " $reboot_suites " == *" $suite "* ]] && : >"$share/reboot"
	[[ " $all_cases_suites " == *" $suite "* ]] && : >"$share/all-cases"
	if [ -n "${SQUASH_NODE_DROPIN:-}" ]; then
		printf '[Service]\n%s\n' "$SQUASH_NODE_DROPIN" >"$share/squashd-dropin.conf"
		say "diagnosis: squashd.service drop-in: $SQUASH_NODE_DROPIN"
	fi
	# TCG with one host thread for both vCPUs (thread=single): with
	# thread=multi, Debian 13's kernel oopsed at boot ("Oops: int3" in
	# devcgroup_check_permission, a static key being patched while the
	# other vCPU ran it), once in three boots here.
	local cpu=(-accel tcg,thread=single -cpu max)
	[ "$accel" = kvm ] && cpu=(-accel kvm -cpu host)

	t_boot=$(date +%s)
	say "booting ($accel, timeout $guest_timeout s); console: $art/console.log"
	# -drive snapshot=on: the guest's writes (also across its reboot) go
	# to a temporary file QEMU deletes; the cached image stays as built.
	qemu-system-x86_64 -name "squash-node-$suite" "${cpu[@]}" -m 1024 -smp 2 \
		-no-user-config -nodefaults -display none -nic none \
		-serial "file:$art/console.log" \
		-kernel "$g/vmlinuz" -initrd "$g/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1" \
		-drive "file=$g/disk.img,format=raw,if=virtio,snapshot=on" \
		-virtfs "local,path=$share,mount_tag=shared,security_model=none,id=shared" \
		>"$art/qemu.log" 2>&1 &
	qemu_pid=$!
	local waited=0
	while kill -0 "$qemu_pid" 2>/dev/null; do
		if [ $waited -ge "$guest_timeout" ]; then
			echo "FAIL $suite: the guest did not power off within $guest_timeout s: killed"
			kill "$qemu_pid"
			rc=1
			break
		fi
		# A guest kernel that panicked would sit there until the timeout.
		if grep -q 'Kernel panic - not syncing' "$art/console.log" 2>/dev/null; then
			echo "FAIL $suite: the guest's kernel panicked: $(grep -m1 -E 'BUG:|Oops:|Kernel panic' "$art/console.log")"
			kill "$qemu_pid"
			rc=1
			break
		fi
		sleep 2
		waited=$((waited + 2))
	done
	wait "$qemu_pid" 2>/dev/null
	qemu_pid=
	say "guest ran $(( $(date +%s) - t_boot )) s; boots: $(tr '\n' ';' <"$share/out/boot-times" 2>/dev/null)"

	# Every case must have an "ok" line; a case with no line did not run.
	results=$share/out/results
	expected="setup boot user_image_fuse trusted_image_kernel restart_while_reading reload reader_cgroup fork_bomb journal_fields double_load remove_purge"
	[ -f "$share/all-cases" ] && expected="$expected dataset catalog_env packed_at_target health_metrics"
	[ -f "$share/reboot" ] && expected="$expected reboot_prepare after_reboot reboot_job_gone reboot_shutdown"
	[ -f "$results" ] && sed 's/^/    /' "$results"
	# ("note" lines: what the guest saw of Slurm's own behaviour; shown,
	# not failed on.)
	missing=""
	for c in $expected; do
		grep -qE "^(ok|note) $c " "$results" 2>/dev/null || missing="$missing $c"
	done
	[ -f "$share/out/done" ] || { echo "    the guest did not finish its run"; rc=1; }
	if [ -n "$missing" ]; then
		echo "FAIL $suite: not ok:$missing"
		rc=1
	fi
	if [ $rc != 0 ]; then
		echo "--- artifacts: $art (console.log, share/out/: results, case-*.log, journal-boot*.txt)"
		echo "--- tail of $art/console.log:"
		tail -n 30 "$art/console.log" | sed 's/^/    /'
		for c in $missing; do
			[ -f "$share/out/case-$c.log" ] || continue
			echo "--- tail of case-$c.log:"
			tail -n 15 "$share/out/case-$c.log" | sed 's/^/    /'
		done
	fi
	say "total $(( $(date +%s) - t0 )) s"
	return $rc
}

failed=()
# The .debs first, one after the other (two builds in one build directory
# would collide); then the guests.
for suite in "$@"; do
	deb_for "$suite" >/dev/null || { echo "FAIL $suite: the .deb did not build"; failed+=("$suite"); }
done
suite=
[ ${#failed[@]} = 0 ] || die "failed: ${failed[*]}"
if [ "${SQUASH_NODE_SEQUENTIAL:-0}" = 1 ] || [ $# -lt 2 ]; then
	for suite in "$@"; do
		run_suite || failed+=("$suite")
	done
else
	# At once, each in a subshell that kills its own QEMU on any exit;
	# their output goes on as it comes, each line marked.
	[ -n "${SQUASH_NODE_TIMEOUT:-}" ] || guest_timeout=1500
	declare -A suite_pid=()
	pids_dir=$(mktemp -d /tmp/squash-node-pids.XXXXXX)
	tmpdirs+=("$pids_dir")
	# Stopped: each subshell is told (its trap kills its QEMU).
	trap 'kill $(cat "$pids_dir"/* 2>/dev/null) 2>/dev/null; wait; exit 130' INT TERM
	for suite in "$@"; do
		(
			echo "$BASHPID" >"$pids_dir/$suite"
			tmpdirs=() # the parent's, not this subshell's to remove
			trap cleanup EXIT
			trap 'exit 130' INT TERM
			run_suite
		) 2>&1 | sed -u "s/^/[$suite] /" &
		suite_pid[$suite]=$!
	done
	for suite in "$@"; do
		wait "${suite_pid[$suite]}" || failed+=("$suite")
	done
	trap 'exit 130' INT TERM
fi
suite=
[ ${#failed[@]} = 0 ] || die "failed: ${failed[*]}"
echo "tests/node/run.sh: all passed ($*)"
