/* squashd: per-node root service that mounts squashfs images for Slurm jobs
 * (see squashd(8) and docs/architecture.md). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "core/adopt.h"
#include "core/daemon.h"
#include "core/gc.h"
#include "core/linger_timer.h"
#include "core/stopped_readers.h"
#include "core/trusted_image.h"
#include "frame.h"
#include "passed_fds.h"
#include "mount/fuse_probe.h"
#include "mount/kernel_prefetch.h"
#include "mount/fuse_reader.h"
#include "mount/private_roots.h"
#include "mount/image_open.h"
#include "mount/mount_fuse.h"
#include "mount/reader_args.h"
#include "process/reader_cgroup.h"
#include "process/server_spawn.h"
#include "process/spawner.h"
#include "process/user_executor.h"
#include "registry/state_file.h"
#include "server/socket_activation.h"
#include "server/workers.h"
#include "settings/reload.h"
#include "settings/settings.h"
#include "slurm/slurm_query.h"
#include "util/log.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: squashd [--config PATH] [--socket PATH] [--debug]\n"
		"Mounts squashfs images for Slurm jobs; runs in the foreground.\n"
		"  -c, --config PATH  configuration file (default " SQUASHD_DEFAULT_CONFIG ")\n"
		"  -s, --socket PATH  listen here instead of the configured socket\n"
		"  -d, --debug        log debug messages\n"
		"  -h, --help         this help\n"
		"  -V, --version      print the version\n");
}

static bool reader_polls; /* the probe found squash-reader --poll-us */
static bool reader_learns; /* and --profile-cache */

static void hand_reader_args(const struct squashd_config *cfg)
{
	reader_args_set(reader_polls ? (int)cfg->reader_poll_us : -1,
			reader_learns ? cfg->start_profile_cache : NULL);
	if (cfg->start_profile_cache[0] && !reader_learns)
		log_warning("start_profile_cache is set, but %s learns no start profiles "
			    "(squash-reader --profile-cache); ignored", config_fuse_server(cfg));
}

/* SIGHUP: the settings, then what modules keep of them. */
static void reload(void *arg)
{
	reload_settings(arg);
	const struct squashd_config *cfg = settings_hold();
	hand_reader_args(cfg);
	settings_drop(cfg);
}

/* mkdir -p for one directory whose parent exists, then force its mode. */
static int ensure_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		log_error("cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		log_error("%s is not a directory", path);
		return -1;
	}
	if (st.st_uid != 0 && chown(path, 0, 0) < 0) {
		log_error("cannot make %s owned by root: %s", path, strerror(errno));
		return -1;
	}
	if ((st.st_mode & 07777) != mode && chmod(path, mode) < 0) {
		log_error("cannot set mode of %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	/* The reconciliation's Slurm query runs as a child of this binary. */
	if (argc >= 2 && !strcmp(argv[1], "--query-slurm"))
		return slurm_query_main(argc - 2, argv + 2);

	static const struct option options[] = {
		{"config", required_argument, NULL, 'c'},
		{"socket", required_argument, NULL, 's'},
		{"debug", no_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *config_path = SQUASHD_DEFAULT_CONFIG, *socket_path = NULL;
	bool config_given = false, debug = false;
	int opt;
	while ((opt = getopt_long(argc, argv, "c:s:dhV", options, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_path = optarg;
			config_given = true;
			break;
		case 's':
			socket_path = optarg;
			break;
		case 'd':
			debug = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("squashd %s, built for Slurm %s; protocol %d, state file format %d\n", PACKAGE_VERSION,
			       SQUASH_SLURM_BUILD_VERSION, SQUASH_PROTOCOL_VERSION, STATE_FILE_FORMAT);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	log_init(debug);
	if (geteuid() != 0) {
		log_error("must run as root (it mounts file systems)");
		return 1;
	}

	struct squashd_config *loaded = settings_new();
	char err[PATH_MAX + 512];
	if (!loaded || config_load(config_path, config_given, loaded, err, sizeof(err)) < 0) {
		log_error("%s", loaded ? err : "out of memory");
		return 1;
	}
	if (loaded->debug)
		log_set_debug(true);
	if (socket_path) {
		if (strlen(socket_path) >= sizeof(loaded->socket_path)) {
			log_error("socket path too long");
			return 1;
		}
		snprintf(loaded->socket_path, sizeof(loaded->socket_path), "%s", socket_path);
	}
	settings_publish(loaded);
	/* Start-up is one operation: it holds the settings it started with. */
	const struct squashd_config *cfg = settings_hold();

	static struct daemon_state ds;
	/* Before any thread exists, so that all of them inherit the mask. */
	server_block_signals();
	if (daemon_init(&ds, cfg) < 0)
		return 1;
	/* mnt/ is root-only: the node-level mounts are reached by jobs only
	 * through the binds in their steps. */
	/* sessions/: enterable by all, listable by none; each session's
	 * directory in it belongs to its user alone (core/sessions.c). */
	if (ensure_dir(cfg->state_dir, 0755) < 0 || ensure_dir(ds.mount_dir, 0700) < 0 ||
	    ensure_dir(ds.sessions_dir, 0711) < 0 ||
	    ensure_dir(cfg->base_dir, 0755) < 0)
		return 1;
	/* Before any user's namespace copies them: what squashd mounts
	 * below them stays out of those namespaces (mount/private_roots.h). */
	daemon_make_roots_private(&ds);

	/* Before any thread: the spawner forks the image openers, so that
	 * squashd itself, with its many threads, never forks per request. */
	static struct spawner_op spawner_ops[SPAWNER_N_OPS];
	spawner_ops[SPAWNER_OPEN_IMAGE] = image_open_spawner_op;
	spawner_ops[SPAWNER_FUSE_PROBE] = fuse_probe_spawner_op;
	spawner_ops[SPAWNER_START_SERVER] = server_spawner_op;
	spawner_ops[SPAWNER_KERNEL_PREFETCH] = kernel_prefetch_spawner_op;
	spawner_start(spawner_ops, SPAWNER_N_OPS);
	/* Still before any thread: under a delegated cgroup v2 squashd and
	 * the spawner move to a leaf of their own. */
	reader_cgroup_set_cpu_weight(cfg->reader_cpu_weight);
	reader_cgroup_init(cfg->reader_cgroups ? "auto" : "no", ds.node_name, cfg->state_dir,
			   cfg->reader_tasks_max, cfg->reader_memory_max);

	/* Which FUSE server user images get, for the log and `squashctl list`;
	 * known before adopting, which keeps connections only for one that
	 * can resume. */
	static struct fuse_reader reader;
	if (cfg->mount_policy != MOUNT_POLICY_KERNEL) {
		fuse_reader_probe(config_fuse_server(cfg), &reader);
		ds.fuse_reader = reader.description;
		ds.fuse_reader_resumes = reader.resumes;
		ds.fuse_reader_pools = reader.serves_many;
		ds.fuse_reader_unions = reader.unions;
		reader_polls = reader.polls;
		reader_learns = reader.learns;
		log_info("FUSE mounts are served by %s (%s)%s", config_fuse_server(cfg), reader.description,
			 !reader.resumes ? ""
			 : fuse_kernel_resends() ? "; one that dies is restarted on its connection"
						 : "; the kernel predates FUSE_NOTIFY_RESEND (6.9): "
						   "a reader that dies is not replaced under running jobs");
	}

	trusted_image_init();
	hand_reader_args(cfg);
	daemon_load(&ds);
	/* A registry that could not be read: the mounts in mnt/ may be
	 * running jobs'; nothing is adopted or cleaned up (daemon.h). */
	if (!ds.state_lost[0])
		adopt_registry(&ds, cfg);

	/* Under squashd.socket systemd holds the socket (and the clients
	 * that connect while squashd restarts); otherwise bind it here. */
	int listen_fd = socket_activation_fd(cfg->socket_path, err, sizeof(err));
	bool activated = listen_fd >= 0;
	if (listen_fd == -1)
		listen_fd = server_listen(cfg->socket_path, err, sizeof(err));
	if (listen_fd < 0) {
		log_error("%s", err);
		/* Adoption's teardowns run on users' threads and read the
		 * registry: they end before it is freed. */
		user_executor_drain(squash_now_ms() + ((long long)cfg->request_timeout_s + 1) * 1000);
		daemon_free(&ds);
		return 1;
	}
	/* No client passes squashd descriptors; one that does must fail at
	 * its sendmsg, not stall a thread here (passed_fds.h). */
	if (squash_refuse_passed_fds(listen_fd) < 0)
		log_warning("this kernel cannot refuse descriptors sent to %s (SO_PASSRIGHTS, Linux 6.16): "
			    "a local user who passes squashd a descriptor whose close waits (a lingering "
			    "TCP socket, a file of a stopped FUSE server) can hold squashd's main loop: %s",
			    cfg->socket_path, strerror(errno));
	log_info("squashd %s (built for Slurm %s; protocol %d, state file format %d) listening on %s%s as node %s "
		 "(mount mode %s, MUNGE %s, gc every %u s, linger %u s)",
		 PACKAGE_VERSION, SQUASH_SLURM_BUILD_VERSION, SQUASH_PROTOCOL_VERSION, STATE_FILE_FORMAT, cfg->socket_path, activated ? " (socket from systemd)" : "",
		 ds.node_name, mount_policy_name(cfg->mount_policy),
		 cfg->require_munge ? "required" : "optional", cfg->gc_interval_s, cfg->linger_s);
	if (cfg->mount_policy == MOUNT_POLICY_KERNEL)
		log_warning("mount_mode = kernel: every image, users' own included, is parsed by the kernel's "
			    "squashfs; only for clusters whose every user is trusted as root");
	reload_init(config_path, config_given, debug);
	server_on_reload(reload, NULL);
	if (gc_start(&ds, cfg) < 0)
		log_error("cannot start the periodic reconciliation with Slurm");
	if (linger_timer_start(&ds) < 0)
		return 1;
	if (stopped_readers_start(&ds) < 0)
		return 1;
	int rc = server_run(listen_fd, &ds);
	stopped_readers_finish();
	/* Nobody can take a lingering mount over any more: unmount them. */
	linger_timer_finish();
	close(listen_fd);
	if (!activated) /* systemd's socket stays for the next squashd */
		unlink(cfg->socket_path);
	/* Requests that outlived the grace period may still hold the lock's
	 * data; the save takes the lock, and exit ends them. */
	pthread_mutex_lock(&ds.lock);
	daemon_save_grouped_locked(&ds); /* (on disk before exit: the saver thread writes it) */
	pthread_mutex_unlock(&ds.lock);
	spawner_stop();
	reader_cgroup_cleanup();
	private_root_release(ds.mount_dir);
	private_root_release(ds.sessions_dir);
	settings_drop(cfg);
	return rc == 0 ? 0 : 1;
}
