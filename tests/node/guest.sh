#!/bin/bash
# Runs INSIDE a guest booted by tests/node/run.sh, as root, from the 9p
# share at /mnt/shared (squash-node-test.service starts it at every boot).
# It does what an admin does on a compute node (README.md, docs/admin.md):
# installs the project's .deb with apt, writes the munge key, slurm.conf,
# cgroup.conf, plugstack.conf and /etc/squashd.conf, then runs the cases of
# issue 29 one by one, each under `timeout`, and writes one line per case to
# /mnt/shared/out/results:
#
#   ok NAME SECONDS
#   FAIL NAME SECONDS: first line of the reason
#
# with the case's whole output in out/case-NAME.log, and `journalctl -b` in
# out/journal-bootN.txt. When run.sh left the file /mnt/shared/reboot, the
# guest reboots once (case reboot_prepare) and goes on after the reboot;
# then it powers off. `guest.sh --case NAME` runs one case
# (the driver calls itself that way, so every case has its own timeout).
set -uo pipefail

shared=/mnt/shared
out=$shared/out
self=$shared/guest.sh
U1=squser1
U2=squser2
TASKS_MAX=64      # reader_tasks_max in squashd.conf
MEMORY_MAX_MB=256 # reader_memory_max in squashd.conf
BOMB_CAP=400      # the fork bomb gives up here: far above TASKS_MAX
data=/home/$U1/data
apps=/apps/images
node=$(hostname)

say() { echo "guest.sh: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
# tmo SECONDS CMD...: every command that may hang runs under this.
tmo() { timeout -k 5 "$@"; }
as_user() { local u=$1; shift; tmo 180 runuser -u "$u" -- "$@"; }
# wait_for SECONDS DESCRIPTION CMD...: polls CMD every half second.
wait_for() {
	local t=$1 what=$2 end
	shift 2
	end=$(( $(date +%s) + t ))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || { echo "timed out after $t s waiting for $what"; return 1; }
		sleep 0.5
	done
}
# job USER IMAGES SCRIPT: runs a batch job, waits for it; prints its output.
# Exit status: sbatch's (the job's).
job() {
	local u=$1 images=$2 script=$3 dir=/home/$1/jobs n rc=0
	mkdir -p "$dir" && chown "$u:" "$dir"
	n=$(date +%s%N)
	printf '#!/bin/bash\n%s\n' "$script" >"$dir/$n.sh"
	chmod 0755 "$dir/$n.sh"
	chown "$u:" "$dir/$n.sh"
	(cd "$dir" && as_user "$u" sbatch --wait -o "$dir/$n.out" "--squash-image=$images" "$dir/$n.sh") >"$dir/$n.sbatch" 2>&1 || rc=$?
	cat "$dir/$n.sbatch" "$dir/$n.out" 2>/dev/null
	return $rc
}
squash_mounts() { grep -E ' - (fuse\.squash-reader|squashfs|fuse\.squashfuse)' /proc/self/mountinfo; }
no_squash_mounts() { ! squash_mounts; }
reader_pids() { pgrep -x squash-reader "$@"; }
unit_pid() { systemctl show -p MainPID --value "$1"; }

# ---------------------------------------------------------------- setup (an admin's steps)
case_setup() {
	local deb
	deb=$(ls "$shared"/deb/slurm-squash_*.deb | head -n 1)
	[ -f "$deb" ] || fail "no .deb in $shared/deb"
	# apt reads the file as _apt: a copy in a world-readable place.
	cp "$deb" /var/tmp/ && deb=/var/tmp/$(basename "$deb")
	chmod 0644 "$deb"
	say "apt-get install $deb"
	# (The guest has no network: apt can only use what the image holds.)
	DEBIAN_FRONTEND=noninteractive tmo 300 apt-get install -y -q "$deb" ||
		fail "apt-get install $(basename "$deb") failed"
	[ "$(dpkg-query -W -f='${Status}' slurm-squash)" = "install ok installed" ] || fail "slurm-squash not installed"

	# munge: a key of this node (Debian 12's package makes none).
	if [ ! -s /etc/munge/munge.key ]; then
		tmo 30 mungekey --create --keyfile=/etc/munge/munge.key || fail "mungekey"
		chown munge:munge /etc/munge/munge.key
		chmod 0400 /etc/munge/munge.key
	fi
	# A one-node cluster with the configuration docs/admin.md supports on
	# cgroup v2. RealMemory fits the guest's 1 GiB; JobRequeue=0 so that
	# the job killed by the reboot is gone, not run again.
	cat >/etc/slurm/slurm.conf <<EOF
ClusterName=squashnode
SlurmctldHost=$node
AuthType=auth/munge
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
PrologFlags=Alloc
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=0
SlurmctldTimeout=30
SlurmdTimeout=30
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmUser=slurm
NodeName=$node CPUs=$(nproc) RealMemory=600 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
	cat >/etc/slurm/cgroup.conf <<EOF
CgroupPlugin=cgroup/v2
ConstrainCores=no
ConstrainRAMSpace=no
EOF
	echo 'include /etc/slurm/plugstack.conf.d/*.conf' >/etc/slurm/plugstack.conf
	mkdir -p /var/lib/slurm/slurmctld /var/lib/slurm/slurmd
	chown slurm: /var/lib/slurm/slurmctld
	# squashd.conf as shipped plus the site's lines (docs/admin.md).
	cat >>/etc/squashd.conf <<EOF

# tests/node: admin-built images get kernel mounts; readers' limits.
trusted_prefixes = $apps
reader_tasks_max = $TASKS_MAX
reader_memory_max = ${MEMORY_MAX_MB}M
EOF
	# Diagnosis only (tests/node/run.sh's SQUASH_NODE_DROPIN): a drop-in for
	# squashd.service, to see which cases a unit change would let pass.
	if [ -s "$shared/squashd-dropin.conf" ]; then
		mkdir -p /etc/systemd/system/squashd.service.d
		cp "$shared/squashd-dropin.conf" /etc/systemd/system/squashd.service.d/tests-node.conf
		echo "squashd.service drop-in (SQUASH_NODE_DROPIN):"
		cat /etc/systemd/system/squashd.service.d/tests-node.conf
		systemctl daemon-reload
	fi
	# A persistent journal: the shutdown of the reboot case is read back
	# after it (journalctl -b -1).
	mkdir -p /var/log/journal
	tmo 30 journalctl --flush
	# Slurm's slurmstepd scope outlives SIGTERM at shutdown and is killed
	# at the stop timeout: 20 s here instead of 90 per reboot (units of
	# slurm-squash hitting it fail case reboot_shutdown all the same).
	mkdir -p /etc/systemd/system.conf.d
	printf '[Manager]\nDefaultTimeoutStopSec=20s\n' >/etc/systemd/system.conf.d/tests-node.conf
	tmo 60 systemctl daemon-reexec
	tmo 60 systemctl restart munge || fail "munge did not start"
	tmo 60 systemctl restart squashd || fail "squashd did not restart with the site's squashd.conf"
	# (The image has them disabled until now: a node being set up.)
	tmo 60 systemctl enable slurmctld slurmd 2>&1
	tmo 60 systemctl restart slurmctld slurmd || fail "slurmctld/slurmd did not start"
	wait_for 90 "the node to be idle" bash -c '[ "$(sinfo -h -n '"$node"' -o %T)" = idle ]' ||
		{ sinfo; fail "node not idle"; }

	# Users, images: a trusted one (root's, under trusted_prefixes), a user's
	# own, three dataset bundles.
	for u in $U1 $U2; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done
	mkdir -p "$apps" /tmp/src/app /tmp/src/data
	chmod 0755 /apps "$apps"
	echo "app from the trusted image" >/tmp/src/app/app.txt
	mksquashfs /tmp/src/app "$apps/app.sqfs" -noappend -quiet -no-progress -all-root >/dev/null
	chmod 0644 "$apps/app.sqfs"
	mkdir -p "$data"
	seq 1 20000 >/tmp/src/data/numbers.txt
	echo "data from the user image" >/tmp/src/data/data.txt
	mksquashfs /tmp/src/data "$data/data.sqfs" -noappend -quiet -no-progress >/dev/null
	for i in 0 1 2; do
		mkdir -p "/tmp/src/ds$i/subject$i"
		echo "subject $i" >"/tmp/src/ds$i/subject$i/info.txt"
		mksquashfs "/tmp/src/ds$i" "$data/bundle_00$i.sqfs" -noappend -quiet -no-progress >/dev/null
	done
	chown -R "$U1:" "$data"
	mkdir -p /home/$U2/data
	mksquashfs /tmp/src/data /home/$U2/data/data.sqfs -noappend -quiet -no-progress >/dev/null
	chown -R "$U2:" /home/$U2/data
}

# ---------------------------------------------------------------- cases
case_boot() {
	echo "PID 1: $(readlink /proc/1/exe); /sys/fs/cgroup: $(stat -fc %T /sys/fs/cgroup)"
	echo "systemd: $(systemctl --version | head -n 1); kernel $(uname -r)"
	echo "controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
	[[ "$(readlink /proc/1/exe)" == */systemd ]] || fail "PID 1 is not systemd"
	[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || fail "/sys/fs/cgroup is not cgroup v2"
	systemctl is-active squashd.socket squashd.service || fail "squashd.socket/service not active after install"
}

case_user_image_fuse() {
	local o
	# The job also says which process serves its mount (the FUSE server
	# is squashd's squash-reader, running as the user).
	o=$(job $U1 "$data/data.sqfs:/squash/data" 'cat /squash/data/data.txt; grep " /squash/data " /proc/self/mountinfo; echo "readers: $(pgrep -x -u $(id -u) squash-reader | xargs)"') ||
		{ echo "$o"; journalctl -u squashd -n 30 --no-pager; fail "job with a user image failed"; }
	echo "$o"
	grep -qx "data from the user image" <<<"$o" || fail "the job did not read the user image"
	# squashd mounts it as fuse.squashfuse (source "squashfuse") whichever
	# reader serves it; squash-reader mounting by itself says
	# fuse.squash-reader... (fsname=squash-reader): both are FUSE.
	grep -qE ' /squash/data .* - fuse\.squash(fuse|-reader|fs) ' <<<"$o" || fail "no FUSE mount at /squash/data in the job"
	grep -qE '^readers: [0-9]' <<<"$o" || fail "no squash-reader of $U1 while its job ran"
}

case_trusted_image_kernel() {
	local o
	o=$(job $U1 "$apps/app.sqfs:/squash/app" 'cat /squash/app/app.txt; grep " /squash/app " /proc/self/mountinfo') ||
		{ echo "$o"; journalctl -u squashd -n 30 --no-pager; fail "job with a trusted image failed"; }
	echo "$o"
	grep -qx "app from the trusted image" <<<"$o" || fail "the job did not read the trusted image"
	grep -qE ' /squash/app .* - squashfs /dev/loop[0-9]+ ' <<<"$o" || fail "no kernel squashfs on a loop device at /squash/app"
}

# A job that reads the image in a loop until told to stop; prints its job id.
start_reader_job() { # user image seconds
	local u=$1 img=$2 secs=$3 dir=/home/$1/jobs
	mkdir -p "$dir" && chown "$u:" "$dir"
	rm -f "$dir/reading" "$dir/stop"
	cat >"$dir/reader.sh" <<EOF
#!/bin/bash
# Reads the image every 0.1 s; each failed read is a line in read-errors.
end=\$(( \$(date +%s) + $secs ))
n=0
while [ ! -e $dir/stop ] && [ \$(date +%s) -lt \$end ]; do
	if md5sum /squash/r/numbers.txt >/dev/null 2>>$dir/read-errors.txt; then n=\$((n + 1)); else echo "read failed at \$(date +%T.%N)" >>$dir/read-errors.txt; fi
	[ \$n = 1 ] && touch $dir/reading
	sleep 0.1
done
echo "reads: \$n"
EOF
	chmod 0755 "$dir/reader.sh"
	: >"$dir/read-errors.txt"
	chown "$u:" "$dir/reader.sh" "$dir/read-errors.txt"
	(cd "$dir" && as_user "$u" sbatch --parsable -o "$dir/reader.out" "--squash-image=$img:/squash/r" "$dir/reader.sh")
}
# wait_reading USER JOBID: until the job reads its image; fails at once,
# with the job's output, when the job ended without reading.
wait_reading() {
	local dir=/home/$1/jobs end=$(( $(date +%s) + 90 ))
	until [ -e "$dir/reading" ]; do
		if [ -z "$(squeue -h -j "$2" 2>/dev/null)" ] || [ "$(date +%s)" -ge $end ]; then
			cat "$dir/reader.out" 2>/dev/null
			tmo 10 journalctl -u squashd -n 5 --no-pager
			echo "FAIL: job $2 (reading $1's image) did not start reading"
			return 1
		fi
		sleep 0.5
	done
}
stop_reader_job() { # user jobid
	touch "/home/$1/jobs/stop"
	wait_for 60 "job $2 to end" bash -c '[ -z "$(squeue -h -j '"$2"' 2>/dev/null)" ]'
}

case_restart_while_reading() {
	local id r1 r2 p1 p2 o t0 t1 dir=/home/$U1/jobs
	id=$(start_reader_job $U1 "$data/data.sqfs" 120) || fail "sbatch failed: $id"
	wait_reading $U1 "$id" || exit 1
	r1=$(reader_pids -u $U1 | sort | tr '\n' ' ')
	p1=$(unit_pid squashd)
	echo "job $id reading; squashd $p1; readers of $U1: $r1"
	[ -n "$r1" ] || fail "no squash-reader of $U1 while its job reads"
	# The restart and a new job's request at the same moment: the request
	# waits in squashd.socket's backlog while squashd is down.
	t0=$(date +%s.%N)
	tmo 60 systemctl restart squashd &
	local restart=$!
	o=$(job $U1 "$data/data.sqfs:/squash/d2" 'cat /squash/d2/data.txt'); local jrc=$?
	wait $restart || { journalctl -u squashd -n 30 --no-pager; fail "systemctl restart squashd failed"; }
	t1=$(date +%s.%N)
	p2=$(unit_pid squashd)
	echo "restart and the job during it: $(echo "$t1 - $t0" | awk '{print $1 - $3}') s; squashd now $p2"
	echo "$o"
	sleep 2
	# Taken while the reading job still runs (its reader exits after it).
	r2=$(reader_pids -u $U1 | sort | tr '\n' ' ')
	stop_reader_job $U1 "$id" || true
	cat "$dir/reader.out"
	[ "$p1" != "$p2" ] || fail "squashd's pid did not change: not restarted"
	[ "$jrc" = 0 ] && grep -qx "data from the user image" <<<"$o" || fail "the job submitted during the restart failed: $(head -n 3 <<<"$o")"
	[ ! -s "$dir/read-errors.txt" ] || fail "the reading job saw read errors: $(head -n 2 "$dir/read-errors.txt")"
	grep -q '^reads: [1-9]' "$dir/reader.out" || fail "the reading job did not read"
	# The reader serving the running job survived (KillMode=process): the
	# same process before and after.
	echo "readers after: $r2"
	[ -n "$r2" ] && [ "$r2" = "$r1" ] || fail "the reader changed across the restart: before '$r1', after '$r2'"
}

case_reload() {
	local p1 p2 o
	p1=$(unit_pid squashd)
	tmo 60 systemctl reload squashd || { journalctl -u squashd -n 20 --no-pager; fail "systemctl reload squashd failed"; }
	p2=$(unit_pid squashd)
	systemctl is-active squashd || fail "squashd not active after reload"
	[ "$p1" = "$p2" ] || fail "reload changed squashd's pid ($p1 -> $p2)"
	journalctl -u squashd -n 10 --no-pager
	o=$(job $U1 "$data/data.sqfs:/squash/data" 'cat /squash/data/data.txt') || { echo "$o"; fail "a job after reload failed"; }
	grep -qx "data from the user image" <<<"$o" || fail "a job after reload did not read its image"
}

# cgroup_of PID: its cgroup v2 path ("0::PATH" in /proc/PID/cgroup).
cgroup_of() { sed -n 's/^0:://p' "/proc/$1/cgroup"; }
# cg_limit FILE PATH: the smallest FILE (pids.max, memory.max) of cgroup
# PATH and its ancestors below the root (the limit its processes meet: a
# slice's counts everything below it); prints "VALUE (CGROUP)", fails when
# every one is "max".
cg_limit() {
	local f=$1 p=$2 v best="" at=""
	while [ -n "$p" ] && [ "$p" != / ]; do
		v=$(cat "/sys/fs/cgroup$p/$f" 2>/dev/null || echo max)
		if [ "$v" != max ] && { [ -z "$best" ] || [ "$v" -lt "$best" ]; }; then best=$v at=$p; fi
		p=${p%/*}
	done
	[ -n "$best" ] && echo "$best ($at)"
}
tasks_limit() { cg_limit pids.max "$1"; }

case_reader_cgroup() {
	local id pids p cg lim mem squashd_cg dir=/home/$U1/jobs
	id=$(start_reader_job $U1 "$data/data.sqfs" 60) || fail "sbatch failed: $id"
	wait_reading $U1 "$id" || exit 1
	squashd_cg=$(cgroup_of "$(unit_pid squashd)")
	echo "squashd: $squashd_cg"
	pids=$(reader_pids)
	[ -n "$pids" ] || fail "no squash-reader running while a job reads a user image"
	local bad=""
	for p in $pids; do
		cg=$(cgroup_of "$p")
		lim=$(tasks_limit "$cg") || lim="none"
		mem=$(cg_limit memory.max "$cg") || mem="none"
		echo "squash-reader $p (uid $(stat -c %u /proc/$p)): $cg; tasks limit: $lim; memory limit: $mem"
		case "$cg" in
		*/squashd.service | */squashd.service/*) bad="$bad; reader $p is in squashd.service's cgroup ($cg)" ;;
		*slurmstepd* | */job_[0-9]* | */step_*) bad="$bad; reader $p is in a job's cgroup ($cg)" ;;
		esac
		if [ "$lim" = none ]; then
			bad="$bad; reader $p has no tasks limit (pids.max is max up to the root)"
		elif [ "${lim%% *}" -gt "$TASKS_MAX" ]; then
			bad="$bad; reader $p's tasks limit $lim is above reader_tasks_max ($TASKS_MAX)"
		fi
		if [ "$mem" = none ] || [ "${mem%% *}" -gt $((MEMORY_MAX_MB * 1024 * 1024)) ]; then
			bad="$bad; reader $p's memory limit ($mem) is not reader_memory_max (${MEMORY_MAX_MB}M)"
		fi
	done
	# The job's own processes: none of them is a reader.
	local step
	for step in $(pgrep -u $U1 -x reader.sh); do echo "job task $step: $(cgroup_of "$step")"; done
	stop_reader_job $U1 "$id" || true
	[ -z "$bad" ] || fail "${bad#; }"
	echo "$pids" >"$out/reader-cgroup-ok"
}

case_fork_bomb() {
	local id rpid cg n o dir=/home/$U1/jobs
	id=$(start_reader_job $U1 "$data/data.sqfs" 90) || fail "sbatch failed: $id"
	wait_reading $U1 "$id" || exit 1
	rpid=$(reader_pids -u $U1 | head -n 1)
	[ -n "$rpid" ] || fail "no reader of $U1"
	cg=$(cgroup_of "$rpid")
	echo "reader $rpid in $cg (tasks limit $(tasks_limit "$cg" || echo none))"
	# A process of the user in the reader's cgroup forks until it cannot
	# (at most BOMB_CAP), holds its children while a new job of another
	# user is served, then lets them go.
	rm -f "$out/bomb-count" "$out/bomb-release"
	tmo 150 bash -c 'echo $$ >"/sys/fs/cgroup$1/cgroup.procs" && exec runuser -u "$2" -- perl -e '"'"'
		$n = 0; for (1..$ARGV[0]) { $p = fork(); last unless defined $p;
			if (!$p) { sleep 120; exit 0 } push @k, $p; $n++ }
		open(F, ">", $ARGV[1]); print F "$n\n"; close F;
		for (1..240) { last if -e $ARGV[2]; select(undef, undef, undef, 0.5) }
		kill "KILL", @k; 1 while wait() > 0;'"'"' "$3" "$4" "$5"' \
		bomb "$cg" $U1 $BOMB_CAP /tmp/bomb-count /tmp/bomb-release &
	local bomb=$!
	wait_for 120 "the fork bomb to stop forking" test -s /tmp/bomb-count || { kill $bomb; fail "the fork bomb never stopped"; }
	n=$(cat /tmp/bomb-count)
	echo "fork bomb in $cg: $n processes forked (cap $BOMB_CAP, reader_tasks_max $TASKS_MAX)"
	o=$(job $U2 "/home/$U2/data/data.sqfs:/squash/data" 'cat /squash/data/data.txt'); local jrc=$?
	echo "$o"
	touch /tmp/bomb-release
	wait $bomb
	rm -f /tmp/bomb-count /tmp/bomb-release
	stop_reader_job $U1 "$id" || true
	[ "$n" -lt "$TASKS_MAX" ] || fail "the fork bomb in the reader's cgroup forked $n processes: not held at reader_tasks_max=$TASKS_MAX"
	[ "$jrc" = 0 ] && grep -qx "data from the user image" <<<"$o" ||
		{ journalctl -u squashd -n 20 --no-pager; fail "squashd did not serve $U2's job during the fork bomb: $(head -n 2 <<<"$o")"; }
}

case_dataset() {
	local o
	o=$(job $U1 "$data/bundle_*.sqfs:/squash/ds" 'ls /squash/ds; cat /squash/ds/subject*/info.txt; echo "SQUASH_IMAGES=$SQUASH_IMAGES"') ||
		{ echo "$o"; fail "the dataset job failed"; }
	echo "$o"
	for i in 0 1 2; do
		grep -qx "subject $i" <<<"$o" || fail "bundle_00$i's subject$i not seen at /squash/ds"
	done
	# The user's bundles: one mount of their reader, the union of the three.
	journalctl -u squashd --no-pager -n 300 | grep >/dev/null "merged 3 images at .* for /squash/ds as one FUSE union" ||
		fail "the dataset was not served as one FUSE union"
}

# Issue 39's user path: an admin packs two versions of an image with
# squash-pack and publishes them to the site catalog; a user finds them,
# inspects the newest (its metadata, without mounting it) and runs a job
# naming it @tools: the newest, with its environment in every task.
case_catalog_env() {
	local cat=$apps/catalog src=/var/tmp/catalog-src o v
	rm -rf "$src" && mkdir -p "$cat" "$src"
	for v in 1.9 1.10; do
		mkdir -p "$src/$v/bin"
		echo "tools $v" >"$src/$v/version.txt"
		printf '#!/bin/sh\necho "tools-version $TOOLS_FLAVOUR"\n' >"$src/$v/bin/tools-version"
		chmod 0755 "$src/$v/bin/tools-version"
		squash-pack --quiet --name tools --version "$v" --target /squash/tools \
			--env default:set:TOOLS_FLAVOUR=gnu "$src/$v" "$src/tools-$v.sqfs" || fail "squash-pack tools $v"
	done
	printf 'catalog %s\n' "$cat" >/etc/squash-images.conf
	for v in 1.9 1.10; do
		squash-images publish "$src/tools-$v.sqfs" "tools/$v" --description "Build tools" || fail "publish tools/$v"
	done
	rm -rf "$src"
	o=$(as_user $U1 squash-images find tool) || fail "squash-images find: $o"
	echo "$o"
	grep -q '^@tools/1.10 *site' <<<"$o" && grep -q '^@tools/1.9 *site' <<<"$o" || fail "find did not list both versions"
	o=$(as_user $U1 squash-images inspect @tools) || fail "squash-images inspect: $o"
	echo "$o"
	grep -q '@tools/1.10 (the newest)' <<<"$o" || fail "inspect @tools is not 1.10"
	grep -qx '  version: 1.10' <<<"$o" && grep -qx '    prepend-path PATH bin' <<<"$o" || fail "inspect shows no metadata"
	o=$(job $U1 "@tools" '#SBATCH -n2
cat "$SQUASH_MOUNT/version.txt"; tools-version; srun -n2 tools-version') ||
		{ echo "$o"; fail "the job naming @tools failed"; }
	echo "$o"
	grep -qx 'tools 1.10' <<<"$o" || fail "the job did not get the newest version"
	[ "$(grep -cx 'tools-version gnu' <<<"$o")" = 3 ] || fail "the image's environment is not in the batch script and both tasks"
	rm -f /etc/squash-images.conf
}

# Environments built in the user's directory and packed with
# squash-pack --target run at their target once the directory is gone: a
# venv (its console script's shebang and pyvenv.cfg name the build path)
# and a conda-style prefix (a shebang to the prefix's sh, a configuration
# naming the prefix).
case_packed_at_target() {
	local b=/home/$U1/build o
	rm -rf "$b" "$b.gone" && as_user $U1 mkdir -p "$b/conda/bin" "$b/conda/etc" "$b/conda/share" "$b/conda/conda-meta" ||
		fail "mkdir"
	as_user $U1 python3 -m venv --without-pip "$b/venv" || fail "python3 -m venv"
	as_user $U1 sh -c "printf '#!$b/venv/bin/python\nimport sys\nprint(\"hellotool\", sys.prefix)\n' >$b/venv/bin/hellotool && chmod 0755 $b/venv/bin/hellotool" ||
		fail "the console script"
	as_user $U1 sh -c "ln -s /bin/sh $b/conda/bin/sh && echo 'the data' >$b/conda/share/msg &&
		echo 'data=$b/conda/share/msg' >$b/conda/etc/condarun.conf &&
		printf '#!$b/conda/bin/sh\n. $b/conda/etc/condarun.conf\ncat \"\$data\"\n' >$b/conda/bin/condarun &&
		chmod 0755 $b/conda/bin/condarun" || fail "the conda-style prefix"
	as_user $U1 squash-pack --quiet --target /squash/venv "$b/venv" "$data/venv.sqfs" || fail "squash-pack venv"
	as_user $U1 squash-pack --quiet --target /squash/conda "$b/conda" "$data/conda.sqfs" || fail "squash-pack conda"
	mv "$b" "$b.gone"
	o=$(job $U1 "$data/venv.sqfs:/squash/venv,$data/conda.sqfs:/squash/conda" 'hellotool; condarun') ||
		{ echo "$o"; fail "the job running the packed environments failed"; }
	echo "$o"
	rm -rf "$b.gone" "$data/venv.sqfs" "$data/conda.sqfs"
	grep -qx 'hellotool /squash/venv' <<<"$o" || fail "the venv's console script did not run at /squash/venv"
	grep -qx 'the data' <<<"$o" || fail "the conda-style prefix did not run at /squash/conda"
}

case_health_metrics() {
	local f=/var/lib/node_exporter/textfile_collector/squashd.prom
	tmo 30 squashctl health || fail "squashctl health failed"
	mkdir -p "${f%/*}"
	rm -f "$f"
	tmo 30 systemctl enable --now squashd-metrics.timer || fail "enabling squashd-metrics.timer failed"
	wait_for 60 "$f" test -s "$f" || { systemctl status squashd-metrics.service --no-pager; fail "the metrics timer wrote no $f"; }
	head -n 5 "$f"
	grep -q '^# TYPE ' "$f" || fail "$f is not Prometheus text"
	tmo 30 systemctl disable --now squashd-metrics.timer
}

case_journal_fields() {
	local o id
	o=$(job $U1 "$data/data.sqfs:/squash/data" 'echo "job $SLURM_JOB_ID"') || { echo "$o"; fail "job failed"; }
	id=$(sed -n 's/^job \([0-9]*\)$/\1/p' <<<"$o")
	[ -n "$id" ] || fail "no job id"
	sleep 2
	o=$(tmo 30 journalctl -u squashd JOB_ID="$id" -o verbose --no-pager)
	echo "$o" | grep -E 'MESSAGE=|JOB_ID=|USER_ID=|IMAGE=|MODE='
	grep -q "IMAGE=$data/data.sqfs" <<<"$o" || fail "no journal entry of squashd with JOB_ID=$id and IMAGE=$data/data.sqfs"
	grep -q "USER_ID=$(id -u $U1)" <<<"$o" || fail "the job's entries have no USER_ID=$(id -u $U1)"
	grep -q "MODE=fuse" <<<"$o" || fail "the job's entries have no MODE=fuse"
}

# The plugin named twice (issue 39): the package's plugstack.conf.d snippet,
# which Debian's own plugstack.conf includes, and a `required` line of the
# admin's in plugstack.conf. slurmd must refuse to start with a message that
# says what to remove; with plugstack.conf restored, jobs run again.
plugstack_saved=/var/tmp/plugstack.conf.before-double-load
restore_plugstack() {
	[ -f "$plugstack_saved" ] || return 0
	mv "$plugstack_saved" /etc/slurm/plugstack.conf
	systemctl reset-failed slurmd 2>/dev/null
	tmo 60 systemctl restart slurmd
}
node_idle() { [ "$(sinfo -h -n "$node" -o %T)" = idle ]; }
case_double_load() {
	local t0 o
	trap restore_plugstack EXIT
	cp /etc/slurm/plugstack.conf "$plugstack_saved"
	grep -h '^required' /etc/slurm/plugstack.conf.d/squash.conf >>/etc/slurm/plugstack.conf
	echo "plugstack.conf: $(grep -v '^#' /etc/slurm/plugstack.conf | tr '\n' ';')"
	t0=$(date +%s)
	# Debian 13's unit (Type=notify) fails the restart; 12's (Type=simple)
	# starts slurmd, which then exits.
	tmo 60 systemctl restart slurmd && echo "systemctl restart slurmd: exit 0"
	wait_for 60 "slurmd to exit" bash -c '! systemctl is-active -q slurmd' ||
		fail "slurmd kept running with spank_squash.so named twice in plugstack.conf"
	wait_for 30 "slurmd's message in the journal" bash -c "journalctl --since @$t0 --no-pager |
		grep -q 'spank_squash.so is loaded twice: .* remove one of them'"
	o=$(tmo 30 journalctl --since "@$t0" --no-pager | grep -E 'slurmd|spank')
	echo "$o"
	grep -q 'spank_squash.so is loaded twice: .* remove one of them' <<<"$o" ||
		fail "slurmd's log does not say that spank_squash.so is loaded twice"
	restore_plugstack
	trap - EXIT
	systemctl is-active -q slurmd || fail "slurmd did not start with plugstack.conf restored"
	wait_for 40 "the node to be idle" node_idle || scontrol update nodename="$node" state=resume
	wait_for 60 "the node to be idle" node_idle || { sinfo; fail "node not idle after slurmd's restart"; }
	o=$(job $U1 "$data/data.sqfs:/squash/data" 'cat /squash/data/data.txt') ||
		{ echo "$o"; fail "a job after plugstack.conf was restored failed"; }
	grep -qx "data from the user image" <<<"$o" || fail "a job after plugstack.conf was restored did not read its image"
}

# Before the reboot: a job holding a user and a trusted image.
case_reboot_prepare() {
	local id dir=/home/$U1/jobs
	id=$(start_reader_job $U1 "$data/data.sqfs" 600) || fail "sbatch failed: $id"
	wait_reading $U1 "$id" || exit 1
	squash_mounts
	squash_mounts >/dev/null || fail "no image mounted before the reboot"
	ls -l /run/squashd/
	echo "$id" >"$out/reboot-job"
}

case_after_reboot() {
	local id o
	id=$(cat "$out/reboot-job")
	tmo 60 systemctl is-system-running --wait
	systemctl is-active squashd.socket squashd || { journalctl -u squashd -b --no-pager | tail -n 20; fail "squashd not active after the reboot"; }
	tmo 30 squashctl health || fail "squashctl health failed after the reboot"
	! squash_mounts || fail "images mounted after the reboot"
	tmo 30 squashctl list
	# A new job at once (the node has a CPU free even while slurmctld
	# still counts the job from before the reboot: case reboot_job_gone).
	o=$(job $U1 "$data/data.sqfs:/squash/data" 'cat /squash/data/data.txt') || { echo "$o"; fail "a job after the reboot failed"; }
	grep -qx "data from the user image" <<<"$o" || fail "a job after the reboot did not read its image"
	# sbatch --wait can return while the epilog (squashd's release) still
	# runs: Slurm's COMPLETING is a flag beside the COMPLETED state (a run
	# of Debian 13's guest found the mount still there as sbatch ended).
	# The release is bounded, not instant.
	wait_for 30 "the job's image to be released" no_squash_mounts ||
		{ squash_mounts; fail "images left mounted 30 s after the job after the reboot"; }
	# Slurm's side, checked last: is the job from before the reboot gone?
	if [ -n "$(squeue -h -j "$id" 2>/dev/null)" ]; then
		echo "job $id from before the reboot still listed by slurmctld, $(squeue -h -j "$id" -o '%T %M'): cancelled" | tee "$out/reboot-job-left"
		tmo 30 scancel "$id"
	fi
}

# Slurm's bookkeeping, not slurm-squash's: reported as a note (see
# run_case's "note" lines), never failed.
case_reboot_job_gone() {
	[ ! -e "$out/reboot-job-left" ] || { echo "NOTE: $(cat "$out/reboot-job-left")"; exit 3; }
}

# The shutdown of the reboot (a job reading a FUSE image at the time): no
# unit of slurm-squash (squashd, its socket, the readers' slices and
# scopes) may hang it until systemd's stop timeout. Other units' timeouts
# (Slurm's slurmstepd scope) are shown, not failed on.
case_reboot_shutdown() {
	local o t
	o=$(tmo 30 journalctl -b -1 --no-pager -o short-monotonic)
	[ -n "$o" ] || fail "no journal of the boot before the reboot"
	t=$(grep -E 'timed out' <<<"$o")
	echo "stop timeouts in the shutdown: ${t:-none}"
	grep -E 'squashd|squash-reader|slurmstepd' <<<"$o" | tail -n 25
	! grep -E 'squashd|squash-reader' <<<"$t" || fail "a unit of slurm-squash hung the shutdown: $(grep -m1 -E 'squashd|squash-reader' <<<"$t")"
}

case_remove_purge() {
	local o
	DEBIAN_FRONTEND=noninteractive tmo 120 apt-get remove -y -q slurm-squash || fail "apt-get remove failed"
	o=$(systemctl list-units --all --no-legend 'squashd*' | grep -v ' inactive ' || true)
	echo "units after remove: ${o:-none active}"
	[ -z "$o" ] || fail "squashd units still loaded/active after remove: $o"
	# No process of the package: squashd, its spawner, readers.
	o=$(pgrep -a 'squashd|squash-reader' || true)
	[ -z "$o" ] || fail "processes of slurm-squash left after remove: $(tr '\n' ';' <<<"$o")"
	! squash_mounts || fail "image mounts left after remove"
	DEBIAN_FRONTEND=noninteractive tmo 120 apt-get purge -y -q slurm-squash || fail "apt-get purge failed"
	[ ! -e /etc/squashd.conf ] || fail "/etc/squashd.conf left after purge"
	! pgrep -x squash-reader || fail "a squash-reader is left after purge"
	! grep -q ' /run/squashd' /proc/self/mountinfo || fail "mounts under /run/squashd left after purge"
	[ "$(dpkg-query -W -f='${Status}' slurm-squash 2>/dev/null || echo none)" != "install ok installed" ] || fail "still installed"
}

# ---------------------------------------------------------------- driver
run_case() { # name timeout
	local name=$1 t=$2 t0 rc first
	t0=$(date +%s)
	say "case $name"
	tmo "$t" bash "$self" --case "$name" >"$out/case-$name.log" 2>&1
	rc=$?
	[ $rc = 124 ] && echo "FAIL: timed out after $t s" >>"$out/case-$name.log"
	sed 's/^/    /' "$out/case-$name.log" >/dev/console
	if [ $rc = 0 ]; then
		echo "ok $name $(( $(date +%s) - t0 ))" >>"$out/results"
	elif [ $rc = 3 ] && grep -q '^NOTE: ' "$out/case-$name.log"; then
		# Not slurm-squash's to pass or fail: shown by the harness.
		echo "note $name $(( $(date +%s) - t0 )): $(grep -m1 '^NOTE: ' "$out/case-$name.log" | sed 's/^NOTE: //')" >>"$out/results"
	else
		first=$(grep -m1 '^FAIL: ' "$out/case-$name.log" | sed 's/^FAIL: //')
		echo "FAIL $name $(( $(date +%s) - t0 )): ${first:-exit $rc}" >>"$out/results"
	fi
	say "case $name: exit $rc ($(( $(date +%s) - t0 )) s)"
}

if [ "${1:-}" = --case ]; then
	"case_$2"
	exit $?
fi

mkdir -p "$out"
exec >>"$out/guest.log" 2>&1
boot=$(( $(cat "$out/boots" 2>/dev/null || echo 0) + 1 ))
echo "$boot" >"$out/boots"
say "boot $boot: waiting for systemd"
tmo 180 systemctl is-system-running --wait
echo "boot $boot $(systemctl is-system-running) $(cut -d' ' -f1 /proc/uptime)" >>"$out/boot-times"
systemctl --failed --no-pager --no-legend

if [ "$boot" = 1 ]; then
	t0=$(date +%s)
	if tmo 600 bash "$self" --case setup >"$out/case-setup.log" 2>&1 </dev/null; then
		echo "ok setup $(( $(date +%s) - t0 ))" >>"$out/results"
		run_case boot 60
		run_case user_image_fuse 180
		run_case trusted_image_kernel 180
		run_case restart_while_reading 240
		run_case reload 120
		run_case reader_cgroup 180
		run_case fork_bomb 240
		run_case journal_fields 120
		run_case double_load 240
		# The product's own logic, the same on every release (the host
		# runs it too): only where tests/node/run.sh asks for it
		# (SQUASH_NODE_ALL_CASES, the first release named; the reboot
		# goes to the last), to keep CI's minutes.
		if [ -f "$shared/all-cases" ]; then
			run_case dataset 180
			run_case catalog_env 240
			run_case packed_at_target 180
			run_case health_metrics 120
		fi
		# The reboot only where tests/node/run.sh asks for it (the
		# newest release: SQUASH_NODE_REBOOT): each boot costs a minute
		# under TCG.
		[ -f "$shared/reboot" ] && run_case reboot_prepare 120
	else
		echo "FAIL setup $(( $(date +%s) - t0 )): $(grep -m1 '^FAIL: ' "$out/case-setup.log" | sed 's/^FAIL: //')" >>"$out/results"
		sed 's/^/    /' "$out/case-setup.log" >/dev/console
	fi
	if grep -q '^ok reboot_prepare' "$out/results"; then
		tmo 60 journalctl -b --no-pager >"$out/journal-boot1.txt"
		say "rebooting"
		sync
		systemctl reboot
		exit 0
	fi
	# No reboot without a job holding mounts: removal is still tried.
	[ -f "$shared/reboot" ] && echo "FAIL after_reboot 0: not run (reboot_prepare failed)" >>"$out/results"
	grep -q '^ok setup' "$out/results" && run_case remove_purge 180
	tmo 60 journalctl -b --no-pager >"$out/journal-boot1.txt"
else
	run_case after_reboot 300
	run_case reboot_job_gone 10
	run_case reboot_shutdown 60
	# The whole journal of boot 1, its shutdown included.
	tmo 60 journalctl -b -1 --no-pager >"$out/journal-boot1.txt"
	run_case remove_purge 180
	tmo 60 journalctl -b --no-pager >"$out/journal-boot$boot.txt"
fi
echo "done" >"$out/done"
sync
systemctl poweroff
