/* squashd's own configuration (/etc/squashd.conf): the node's policy.
 *
 * Reading the settings, the one rule: the settings in force are an
 * immutable snapshot. settings_hold() returns it and keeps it alive until
 * settings_drop(); a reload (reload.h) builds a new snapshot and publishes
 * it with settings_publish(), which swaps one pointer under a mutex and
 * drops the old snapshot (freed when its last holder lets go). Every
 * operation (a request, a teardown, a gc pass, a linger round, a process
 * exit) holds one snapshot for its whole run and reads every setting
 * through that pointer, so it sees one consistent set; the functions it
 * calls get the pointer (or a struct teardown carrying it). Nothing writes
 * a published snapshot. */
#ifndef SQUASHD_SETTINGS_H
#define SQUASHD_SETTINGS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile_cache_path.h"
#include "target.h"

#define SQUASHD_DEFAULT_CONFIG "/etc/squashd.conf"

enum mount_policy {
	MOUNT_POLICY_AUTO,   /* kernel for trusted images, FUSE for the rest */
	MOUNT_POLICY_FUSE,   /* FUSE for every image */
	MOUNT_POLICY_KERNEL, /* kernel for every image */
};

struct squashd_config {
	char socket_path[PATH_MAX];
	char state_dir[PATH_MAX];  /* registry file and mnt/ */
	char base_dir[PATH_MAX];   /* steps mount a tmpfs here */
	struct squash_prefixes allowed_targets;
	struct squash_prefixes trusted_prefixes;
	enum mount_policy mount_policy;
	uint32_t kernel_fs_types;    /* fs_types.h: file systems kernel mounts may read from */
	bool require_munge;
	char munge_socket[PATH_MAX]; /* empty: libmunge's default */
	char squashfuse[PATH_MAX];
	char squash_reader[PATH_MAX];
	bool use_squashfuse_ll;      /* fuse_reader = squashfuse_ll: not the project's own */
	unsigned max_images_per_job;
	unsigned request_timeout_s;
	unsigned max_requests_per_user; /* requests served at once for one user; 0: no limit */
	unsigned max_queued_per_user; /* requests of one user waiting for those; 0: none wait */
	unsigned max_fds_per_user;   /* descriptors held for one user's mounts; 0: RLIMIT_NOFILE / 4 */
	unsigned gc_interval_s;      /* reconcile with Slurm this often; 0: only on demand */
	char slurm_conf[PATH_MAX];   /* empty: libslurm's default (SLURM_CONF or /etc/slurm) */
	char node_name[256];         /* this node's Slurm name; empty: short host name */
	unsigned max_loop_devices;   /* kernel mounts at once; 0: as many as the kernel gives */
	unsigned max_loop_devices_per_user; /* kernel mounts one user's holders hold; 0: max_loop_devices / 4 */
	bool debug;                  /* log debug messages (also: squashd --debug) */
	unsigned linger_s;           /* keep an unused node-level mount this long; 0: unmount at once */
	unsigned long long overlay_size; /* bytes of a job's writable-overlay tmpfs per node; 0: no :rw */
	unsigned registry_entries_per_user; /* a user's jobs, steps and sessions in the registry */
	unsigned max_session_binds_per_user; /* images a user's squash-shell sessions bind; 0: no bound */
	unsigned max_merged_mounts_per_user; /* merged mounts one user's holders hold; 0: no bound */
	unsigned max_fuse_mounts_per_user; /* FUSE entries of the node's table for one user; 0: mount_max / 4 */
	int fusermount_mount_max;    /* fusermount's mount_max (settings/fuse_conf.h), read with the settings */
	unsigned long long registry_bytes_per_user; /* their records in the state file, as written */
	bool reader_cgroups;         /* each user's FUSE servers in a cgroup of their own */
	unsigned reader_tasks_max;   /* pids.max there; 0: no limit */
	unsigned long long reader_memory_max; /* memory.max there; 0: no limit */
	unsigned reader_cpu_weight;  /* cpu.weight there (1-10000; v1: cpu.shares weight * 1024 / 100) */
	bool fuse_union;             /* FUSE images merged at one target: one union mount (core/union_mount.h) */
	unsigned union_trusted_images; /* groups of this many images or more: a union even when trusted; 0: never */
	unsigned reader_poll_us;     /* squash-reader --poll-us: a scan's next request polled for; 0: never */
	unsigned stopped_reader_timeout_s; /* a user's FUSE server stopped this long is killed; 0: never */
	/* squash-reader --profile-cache: where readers learn start profiles,
	 * a template they expand as the user (profile_cache_path.h); empty: off */
	char start_profile_cache[PROFILE_CACHE_TEMPLATE_MAX + 1];
};

#define SQUASHD_LINGER_MAX_S 3600
/* Long enough for a debugger's look, short of a health check's timeout. */
#define SQUASHD_STOPPED_READER_TIMEOUT_DEFAULT 10
#define SQUASHD_STOPPED_READER_TIMEOUT_MAX 3600
/* Per-user registry budgets (registry/usage.h): far above a real site's
 * use (a user's jobs, steps and sessions on one node, a few images each:
 * 4096 entries of ~300 bytes are 1.2 MiB). Every save writes every
 * user's bytes and a prolog's answer waits for one: at 16 MiB one user's
 * records made each save 140 ms, at 4 MiB 40 ms (docs/security.md). */
#define SQUASHD_REGISTRY_ENTRIES_DEFAULT 4096
#define SQUASHD_REGISTRY_BYTES_DEFAULT (4ULL << 20)
/* Room for a few jobs' records with long paths; 0 would refuse every
 * image on the node, root's too. */
#define SQUASHD_REGISTRY_BYTES_MIN (64ULL << 10)
/* One session of max_images_per_job's default: squash-shell sessions are
 * a login node's few interactive commands, not a job's hundreds. */
#define SQUASHD_SESSION_BINDS_DEFAULT 1024
/* A dataset job merges its bundles at a target or two: far above that,
 * far below what would fill a node's mount table. */
#define SQUASHD_MERGED_MOUNTS_DEFAULT 256
#define SQUASHD_OVERLAY_DEFAULT (1ULL << 30)
#define SQUASHD_OVERLAY_MAX (1ULL << 40)
#define SQUASHD_READER_TASKS_DEFAULT 4096
/* One user's FUSE servers use a few MiB (docs/performance.md, section 6);
 * the rest is the page cache of the images they read, which the kernel
 * reclaims within the limit. A budget, not a size: node memory is shared. */
#define SQUASHD_READER_MEMORY_DEFAULT (2ULL << 30)
#define SQUASHD_READER_CPU_WEIGHT_DEFAULT 100 /* the kernel's and systemd's default */
/* Requests served at once for one user (server/user_queues.h): well below
 * the 512 workers, so stuck requests of a few users leave the rest. */
#define SQUASHD_MAX_REQUESTS_PER_USER_DEFAULT 32
#define SQUASHD_MAX_REQUESTS_PER_USER_MAX 256
/* Requests of one user waiting, without a thread, for one of those
 * (server/user_queues.h); beyond it they are refused at once. */
#define SQUASHD_MAX_QUEUED_PER_USER_DEFAULT 64
#define SQUASHD_MAX_QUEUED_PER_USER_MAX 4096

/* Fills cfg with defaults, then reads path. Refuses a file that is not a
 * regular file owned by root or that group or others may write. A missing
 * file is an error only when must_exist. Returns 0 or -1 with err naming
 * the file and, for a bad line, its number. */
int config_load(const char *path, bool must_exist, struct squashd_config *cfg,
		char *err, size_t errlen);

void config_free(struct squashd_config *cfg);

/* The defaults (what config_load starts from), and one "key = value"
 * setting applied to cfg: 0, or -1 with err. */
void config_defaults(struct squashd_config *cfg);
int config_set(struct squashd_config *cfg, const char *key, const char *value, char *err,
	       size_t errlen);

/* A new snapshot, zeroed, not yet published (fill it, then publish it or
 * settings_drop it). NULL when out of memory. */
struct squashd_config *settings_new(void);
/* A new unpublished snapshot that copies cfg (prefixes included). */
struct squashd_config *settings_copy(const struct squashd_config *cfg);
/* Makes cfg the settings in force; takes the caller's reference. */
void settings_publish(struct squashd_config *cfg);
/* The settings in force, held until settings_drop; NULL before the first
 * settings_publish. */
const struct squashd_config *settings_hold(void);
void settings_drop(const struct squashd_config *cfg);

/* The configuration as key/value text, one per setting (for the status
 * answer and the reload log). Returns how many were filled. */
#define SETTINGS_SHOWN_MAX 48
struct setting_text {
	const char *key;
	char value[PATH_MAX * 2];
};
size_t settings_describe(const struct squashd_config *cfg, struct setting_text *out, size_t cap);

const char *mount_policy_name(enum mount_policy p);

/* The FUSE server users' images get (fuse_reader, squash_reader and
 * squashfuse settings). */
const char *config_fuse_server(const struct squashd_config *cfg);

/* s without leading and trailing white space (in place): the parsing of
 * "key = value" lines, shared with the reload's change detection. */
char *config_trim(char *s);

#endif
